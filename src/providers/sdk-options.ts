/** Generous SDK timeout: the provider actor's own deadline (PROVIDER_TIMEOUT_MS, via the signal) fires long before. */
export const sdkTimeoutMs = 10 * 60_000;
