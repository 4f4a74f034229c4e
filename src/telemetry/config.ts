/**
 * The standard OpenTelemetry variables this service reads (docs/telemetry.md). Traces are exported only
 * when an OTLP endpoint is set; everything else has the specification's default. Read here, with no
 * OpenTelemetry package loaded: a service without an endpoint never loads the SDK.
 */

/** How spans travel: OTLP over HTTP as protobuf or as JSON (gRPC is not offered). */
type OtlpProtocol = 'http/protobuf' | 'http/json';

/** The trace export as the OTEL_* variables configure it. */
export interface TelemetryConfig {
  /** Where spans are sent: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as given, else OTEL_EXPORTER_OTLP_ENDPOINT + `/v1/traces`. */
  readonly tracesUrl: string;
  readonly protocol: OtlpProtocol;
  /** OTEL_EXPORTER_OTLP_(TRACES_)HEADERS: credentials for the collector (Langfuse's basic auth): never logged. */
  readonly headers: Readonly<Record<string, string>>;
  /** OTEL_SERVICE_NAME [study-helper]. */
  readonly serviceName: string;
  /** OTEL_RESOURCE_ATTRIBUTES: more resource attributes (`deployment.environment.name=prod,…`). */
  readonly resourceAttributes: Readonly<Record<string, string>>;
  /** OTEL_EXPORTER_OTLP_(TRACES_)TIMEOUT [10000]: how long one export may take. */
  readonly exportTimeoutMs: number;
  /** The batch span processor's OTEL_BSP_* settings. */
  readonly batch: {
    readonly scheduledDelayMillis: number;
    readonly maxQueueSize: number;
    readonly maxExportBatchSize: number;
    readonly exportTimeoutMillis: number;
  };
}

/** Every variable `readTelemetryConfig` reads (docs/configuration.md is checked against it). */
export const telemetryVariableNames: readonly string[] = [
  'OTEL_SDK_DISABLED',
  'OTEL_TRACES_EXPORTER',
  'OTEL_EXPORTER_OTLP_ENDPOINT',
  'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT',
  'OTEL_EXPORTER_OTLP_PROTOCOL',
  'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL',
  'OTEL_EXPORTER_OTLP_HEADERS',
  'OTEL_EXPORTER_OTLP_TRACES_HEADERS',
  'OTEL_EXPORTER_OTLP_TIMEOUT',
  'OTEL_EXPORTER_OTLP_TRACES_TIMEOUT',
  'OTEL_SERVICE_NAME',
  'OTEL_RESOURCE_ATTRIBUTES',
  'OTEL_BSP_SCHEDULE_DELAY',
  'OTEL_BSP_MAX_QUEUE_SIZE',
  'OTEL_BSP_MAX_EXPORT_BATCH_SIZE',
  'OTEL_BSP_EXPORT_TIMEOUT',
];

/** Reports a bad value: the caller's error (a `ConfigError`) names the variable; never returns. */
export type ConfigFailure = (variable: string, message: string) => never;

/** An unset or empty variable reads as absent, as everywhere else in the configuration. */
function value(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const raw = env[name]?.trim();
  return raw === undefined || raw === '' ? undefined : raw;
}

function httpUrl(raw: string, name: string, fail: ConfigFailure): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return fail(name, 'must be an http:// or https:// URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    return fail(name, 'must be an http:// or https:// URL');
  return url;
}

function tracesUrl(env: NodeJS.ProcessEnv, fail: ConfigFailure): string | undefined {
  const signal = value(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT');
  if (signal !== undefined) return httpUrl(signal, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', fail).toString();
  const base = value(env, 'OTEL_EXPORTER_OTLP_ENDPOINT');
  if (base === undefined) return undefined;
  const url = httpUrl(base, 'OTEL_EXPORTER_OTLP_ENDPOINT', fail);
  // The specification: the base endpoint gets the signal's path appended (`/v1/traces`).
  url.pathname = `${url.pathname.replace(/\/+$/, '')}/v1/traces`;
  return url.toString();
}

/** `key=value,key2=value2`, each part URL-decoded (the specification's W3C-baggage-like list). */
function keyValueList(raw: string | undefined, name: string, fail: ConfigFailure): Record<string, string> {
  const pairs: Record<string, string> = {};
  if (raw === undefined) return pairs;
  for (const part of raw.split(',')) {
    if (part.trim() === '') continue;
    const equals = part.indexOf('=');
    if (equals <= 0) fail(name, 'must be a comma-separated list of key=value');
    try {
      pairs[decodeURIComponent(part.slice(0, equals).trim())] = decodeURIComponent(
        part.slice(equals + 1).trim(),
      );
    } catch {
      // The value is not echoed: headers hold credentials.
      fail(name, 'holds a malformed %-escape');
    }
  }
  return pairs;
}

function wholeNumber(
  env: NodeJS.ProcessEnv,
  name: string,
  fallback: number,
  min: number,
  fail: ConfigFailure,
): number {
  const raw = value(env, name);
  if (raw === undefined) return fallback;
  const parsed = Number(raw);
  if (!/^\d+$/.test(raw) || !Number.isSafeInteger(parsed) || parsed < min) {
    return fail(name, `must be a whole number of at least ${min} (got ${JSON.stringify(raw.slice(0, 40))})`);
  }
  return parsed;
}

function protocol(env: NodeJS.ProcessEnv, fail: ConfigFailure): OtlpProtocol {
  const name =
    value(env, 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL') === undefined
      ? 'OTEL_EXPORTER_OTLP_PROTOCOL'
      : 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL';
  const raw = value(env, name) ?? 'http/protobuf';
  if (raw === 'http/protobuf' || raw === 'http/json') return raw;
  return fail(
    name,
    `must be http/protobuf or http/json (got ${JSON.stringify(raw.slice(0, 40))}; gRPC is not offered)`,
  );
}

/**
 * The trace export the environment asks for, or `undefined` when it asks for none: no endpoint, or
 * OTEL_SDK_DISABLED=true, or OTEL_TRACES_EXPORTER=none. A bad value fails through `fail`.
 */
export function readTelemetryConfig(
  env: NodeJS.ProcessEnv,
  fail: ConfigFailure,
): TelemetryConfig | undefined {
  const disabled = value(env, 'OTEL_SDK_DISABLED')?.toLowerCase();
  if (disabled !== undefined && disabled !== 'true' && disabled !== 'false')
    fail('OTEL_SDK_DISABLED', 'must be true or false');
  const exporter = value(env, 'OTEL_TRACES_EXPORTER')?.toLowerCase();
  if (exporter !== undefined && exporter !== 'otlp' && exporter !== 'none')
    fail('OTEL_TRACES_EXPORTER', 'must be otlp or none');
  const url = tracesUrl(env, fail);
  const chosenProtocol = protocol(env, fail);
  if (url === undefined || disabled === 'true' || exporter === 'none') return undefined;
  const timeoutName =
    value(env, 'OTEL_EXPORTER_OTLP_TRACES_TIMEOUT') === undefined
      ? 'OTEL_EXPORTER_OTLP_TIMEOUT'
      : 'OTEL_EXPORTER_OTLP_TRACES_TIMEOUT';
  const maxQueueSize = wholeNumber(env, 'OTEL_BSP_MAX_QUEUE_SIZE', 2048, 1, fail);
  const maxExportBatchSize = wholeNumber(env, 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE', 512, 1, fail);
  if (maxExportBatchSize > maxQueueSize)
    fail('OTEL_BSP_MAX_EXPORT_BATCH_SIZE', `must not exceed OTEL_BSP_MAX_QUEUE_SIZE (${maxQueueSize})`);
  return {
    tracesUrl: url,
    protocol: chosenProtocol,
    headers: {
      ...keyValueList(value(env, 'OTEL_EXPORTER_OTLP_HEADERS'), 'OTEL_EXPORTER_OTLP_HEADERS', fail),
      ...keyValueList(
        value(env, 'OTEL_EXPORTER_OTLP_TRACES_HEADERS'),
        'OTEL_EXPORTER_OTLP_TRACES_HEADERS',
        fail,
      ),
    },
    serviceName: value(env, 'OTEL_SERVICE_NAME') ?? 'study-helper',
    resourceAttributes: keyValueList(
      value(env, 'OTEL_RESOURCE_ATTRIBUTES'),
      'OTEL_RESOURCE_ATTRIBUTES',
      fail,
    ),
    exportTimeoutMs: wholeNumber(env, timeoutName, 10_000, 1, fail),
    batch: {
      scheduledDelayMillis: wholeNumber(env, 'OTEL_BSP_SCHEDULE_DELAY', 5000, 0, fail),
      maxQueueSize,
      maxExportBatchSize,
      exportTimeoutMillis: wholeNumber(env, 'OTEL_BSP_EXPORT_TIMEOUT', 30_000, 1, fail),
    },
  };
}

/** The telemetry settings as start-up may log them: the collector's headers read `set`, never their values. */
export function loggableTelemetry(config: TelemetryConfig | undefined): Record<string, unknown> | 'off' {
  if (config === undefined) return 'off';
  const { headers, ...rest } = config;
  return { ...rest, headers: Object.keys(headers).length === 0 ? 'unset' : 'set' };
}
