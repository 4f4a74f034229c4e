/** The emulator's control endpoint (docs/emulator.md), from the bench parent. */
export interface ProviderCalls {
  readonly calls: number;
  /** Calls per salted key fingerprint (the emulator's own salt). */
  readonly byKey?: Record<string, number>;
}

export async function setFault(emulatorUrl: string, spec: Record<string, unknown>): Promise<void> {
  const response = await fetch(`${emulatorUrl}/_emulator/faults`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(spec),
  });
  if (!response.ok) throw new Error(`emulator refused fault ${JSON.stringify(spec)}: ${response.status} ${await response.text()}`);
}

/** Pieces each streamed answer is cut into (0: one per token, the emulator's default). */
export async function setStreamPieces(emulatorUrl: string, pieces: number): Promise<void> {
  const response = await fetch(`${emulatorUrl}/_emulator/pieces`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ pieces }),
  });
  if (!response.ok) throw new Error(`emulator refused ${pieces} pieces: ${response.status} ${await response.text()}`);
}

export async function resetFaults(emulatorUrl: string): Promise<void> {
  await fetch(`${emulatorUrl}/_emulator/faults`, { method: 'DELETE' });
}

export async function resetStats(emulatorUrl: string): Promise<void> {
  await fetch(`${emulatorUrl}/_emulator/stats`, { method: 'DELETE' });
}

/** Generation calls that reached `provider` since the last reset. */
export async function providerCalls(emulatorUrl: string, provider: string): Promise<number> {
  const response = await fetch(`${emulatorUrl}/_emulator/stats`);
  const stats = (await response.json()) as Record<string, ProviderCalls | undefined>;
  return stats[provider]?.calls ?? 0;
}

/** Generation calls that reached `provider` with the key the emulator fingerprints as `keyId`. */
export async function keyCalls(emulatorUrl: string, provider: string, keyId: string): Promise<number> {
  const response = await fetch(`${emulatorUrl}/_emulator/stats`);
  const stats = (await response.json()) as Record<string, ProviderCalls | undefined>;
  return stats[provider]?.byKey?.[keyId] ?? 0;
}

/** The key fingerprints `provider` saw since the last reset. */
export async function keyIds(emulatorUrl: string, provider: string): Promise<string[]> {
  const response = await fetch(`${emulatorUrl}/_emulator/stats`);
  const stats = (await response.json()) as Record<string, ProviderCalls | undefined>;
  return Object.keys(stats[provider]?.byKey ?? {});
}
