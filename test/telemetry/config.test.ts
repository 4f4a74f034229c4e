/** The OTEL_* variables as the specification reads them (docs/telemetry.md), and bad values refused by name. */
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, loggableConfig } from '../../src/config.js';

describe('OTEL_* variables', () => {
  it('exports nothing without an endpoint, or when the SDK or the exporter is turned off', () => {
    expect(loadConfig({}).telemetry).toBeUndefined();
    expect(
      loadConfig({ OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_SERVICE_NAME: 'x' }).telemetry,
    ).toBeUndefined();
    expect(
      loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SDK_DISABLED: 'true' })
        .telemetry,
    ).toBeUndefined();
    expect(
      loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_TRACES_EXPORTER: 'none' })
        .telemetry,
    ).toBeUndefined();
  });

  it('appends /v1/traces to the base endpoint and takes the traces endpoint as it is', () => {
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }).telemetry?.tracesUrl).toBe(
      'http://collector:4318/v1/traces',
    );
    expect(
      loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'https://cloud.langfuse.com/api/public/otel/' }).telemetry
        ?.tracesUrl,
    ).toBe('https://cloud.langfuse.com/api/public/otel/v1/traces');
    expect(
      loadConfig({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318',
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://tempo:4318/custom/path',
      }).telemetry?.tracesUrl,
    ).toBe('http://tempo:4318/custom/path');
  });

  it('defaults to http/protobuf, service study-helper and the batch processor defaults', () => {
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }).telemetry).toMatchObject({
      protocol: 'http/protobuf',
      serviceName: 'study-helper',
      headers: {},
      exportTimeoutMs: 10_000,
      batch: {
        scheduledDelayMillis: 5000,
        maxQueueSize: 2048,
        maxExportBatchSize: 512,
        exportTimeoutMillis: 30_000,
      },
    });
  });

  it('reads the headers, resource attributes, protocol and batch settings', () => {
    const telemetry = loadConfig({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_EXPORTER_OTLP_HEADERS: 'Authorization=Basic%20cGs6c2s=,x-tenant=a',
      OTEL_EXPORTER_OTLP_TRACES_HEADERS: 'x-tenant=b',
      OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=prod',
      OTEL_SERVICE_NAME: 'notes',
      OTEL_BSP_SCHEDULE_DELAY: '100',
      OTEL_BSP_MAX_QUEUE_SIZE: '10',
      OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '5',
    }).telemetry;
    expect(telemetry).toMatchObject({
      protocol: 'http/json',
      serviceName: 'notes',
      headers: { Authorization: 'Basic cGs6c2s=', 'x-tenant': 'b' },
      resourceAttributes: { 'deployment.environment.name': 'prod' },
      batch: { scheduledDelayMillis: 100, maxQueueSize: 10, maxExportBatchSize: 5 },
    });
  });

  it('refuses gRPC, a bad URL and bad numbers, naming the variable', () => {
    const refused = (env: NodeJS.ProcessEnv): string => {
      try {
        loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', ...env });
      } catch (error) {
        if (error instanceof ConfigError) return error.variable;
        throw error;
      }
      throw new Error('accepted');
    };
    expect(refused({ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).toBe('OTEL_EXPORTER_OTLP_PROTOCOL');
    expect(refused({ OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'grpc' })).toBe(
      'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL',
    );
    expect(refused({ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' })).toBe('OTEL_EXPORTER_OTLP_ENDPOINT');
    expect(refused({ OTEL_BSP_SCHEDULE_DELAY: 'soon' })).toBe('OTEL_BSP_SCHEDULE_DELAY');
    expect(refused({ OTEL_BSP_MAX_QUEUE_SIZE: '4', OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '8' })).toBe(
      'OTEL_BSP_MAX_EXPORT_BATCH_SIZE',
    );
    expect(refused({ OTEL_EXPORTER_OTLP_HEADERS: 'no-equals-sign' })).toBe('OTEL_EXPORTER_OTLP_HEADERS');
  });

  it('never logs the collector headers (they hold credentials)', () => {
    const logged = JSON.stringify(
      loggableConfig(
        loadConfig({
          OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318',
          OTEL_EXPORTER_OTLP_HEADERS: 'Authorization=Basic%20c2VjcmV0LXRva2Vu',
        }),
      ),
    );
    expect(logged).not.toContain('c2VjcmV0LXRva2Vu');
    expect(logged).toContain('"headers":"set"');
  });
});
