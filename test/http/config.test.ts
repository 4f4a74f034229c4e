import { availableParallelism } from 'node:os';
import { describe, expect, it } from 'vitest';
import { Writable } from 'node:stream';
import { ConfigError, loadConfig, loggableConfig } from '../../src/config.js';
import { startService } from '../../src/http/service.js';

describe('loadConfig', () => {
  it('uses every documented default when the environment is empty', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      port: 3000,
      host: '127.0.0.1',
      breaker: { threshold: 5, recoveryMs: 60_000, minDistinctKeys: 2 },
      retry: { max: 2, backoffMs: [1000, 2000] },
      fallbackMode: 'retry-then-fallback',
      providerTimeoutMs: 60_000,
      providersDefaultOrder: ['claude', 'gpt', 'timelygpt'],
      timelygptTokenTtlMs: 3_300_000,
      redisUrl: undefined,
      redisPrefix: 'study-helper:',
      maxUploadMb: 20,
      maxPdfPages: 1000,
      documentTtlSeconds: 7200,
      adminToken: undefined,
      baseUrls: {
        claude: 'https://api.anthropic.com',
        gpt: 'https://api.openai.com/v1',
        timelygpt: 'https://hello.timelygpt.co.kr/api/v2/chat',
      },
      logLevel: 'info',
      inspect: false,
      demo: false,
      warnings: [],
    });
  });

  it('defaults PDF_WORKERS to the cores but one, at least one', () => {
    expect(loadConfig({}).pdf.workers).toBe(Math.max(1, availableParallelism() - 1));
  });

  it('reads every variable it is given', () => {
    const config = loadConfig({
      PORT: '8080',
      HOST: '0.0.0.0',
      BREAKER_FAILURE_THRESHOLD: '3',
      BREAKER_RECOVERY_MS: '1500',
      RETRY_MAX: '1',
      RETRY_BACKOFF_MS: ' 5, 10 ,20',
      FALLBACK_MODE: 'fallback-first',
      PROVIDER_TIMEOUT_MS: '250',
      PROVIDERS_DEFAULT_ORDER: 'gpt,claude',
      TIMELYGPT_TOKEN_TTL_MS: '1000',
      REDIS_URL: 'redis://127.0.0.1:6379',
      REDIS_PREFIX: 'sh-test:',
      MAX_UPLOAD_MB: '2.5',
      MAX_PDF_PAGES: '10',
      DOCUMENT_TTL_SECONDS: '60',
      PDF_WORKERS: '3',
      PDF_TIMEOUT_MS: '5000',
      PDF_WORKER_MEMORY_MB: '96',
      PDF_MAX_DECODED_MB: '8',
      ADMIN_TOKEN: 'test-admin-token-0001',
      ANTHROPIC_BASE_URL: 'http://127.0.0.1:9999/anthropic/',
      OPENAI_BASE_URL: 'http://127.0.0.1:9999/openai/v1',
      TIMELYGPT_BASE_URL: 'http://127.0.0.1:9999/timelygpt/api/v2/chat',
      CLAUDE_MODEL: 'claude-x',
      GPT_MODEL: 'gpt-x',
      TIMELYGPT_MODEL: 'timely-x',
      LOG_LEVEL: 'warn',
      INSPECT: 'true',
      DEMO: '1',
    });
    expect(config).toMatchObject({
      port: 8080,
      host: '0.0.0.0',
      breaker: { threshold: 3, recoveryMs: 1500 },
      retry: { max: 1, backoffMs: [5, 10, 20] },
      fallbackMode: 'fallback-first',
      providerTimeoutMs: 250,
      providersDefaultOrder: ['gpt', 'claude'],
      timelygptTokenTtlMs: 1000,
      redisUrl: 'redis://127.0.0.1:6379',
      redisPrefix: 'sh-test:',
      maxUploadMb: 2.5,
      maxPdfPages: 10,
      documentTtlSeconds: 60,
      pdf: { workers: 3, timeoutMs: 5000, workerMemoryMb: 96, maxDecodedMb: 8 },
      adminToken: 'test-admin-token-0001',
      baseUrls: {
        claude: 'http://127.0.0.1:9999/anthropic',
        gpt: 'http://127.0.0.1:9999/openai/v1',
        timelygpt: 'http://127.0.0.1:9999/timelygpt/api/v2/chat',
      },
      models: { claude: 'claude-x', gpt: 'gpt-x', timelygpt: 'timely-x' },
      logLevel: 'warn',
      inspect: true,
      demo: true,
    });
  });

  it('treats an empty variable as unset', () => {
    expect(loadConfig({ PORT: '', ADMIN_TOKEN: '' })).toMatchObject({ port: 3000, adminToken: undefined });
  });

  it.each([
    ['PORT', 'abc'],
    ['PORT', '70000'],
    ['PORT', '3.5'],
    ['BREAKER_FAILURE_THRESHOLD', '0'],
    ['BREAKER_RECOVERY_MS', '-1'],
    ['RETRY_MAX', 'two'],
    ['RETRY_BACKOFF_MS', '1000,,2000'],
    ['RETRY_BACKOFF_MS', '1000,fast'],
    ['RETRY_BACKOFF_MS', '-5'],
    ['FALLBACK_MODE', 'random'],
    ['PROVIDER_TIMEOUT_MS', '0'],
    ['TIMELYGPT_TOKEN_TTL_MS', 'x'],
    ['REDIS_URL', 'http://localhost:6379'],
    ['MAX_UPLOAD_MB', '0'],
    ['MAX_PDF_PAGES', '1e9'],
    ['DOCUMENT_TTL_SECONDS', 'forever'],
    ['PDF_WORKERS', '0'],
    ['PDF_TIMEOUT_MS', 'soon'],
    ['PDF_WORKER_MEMORY_MB', '8'],
    ['PDF_MAX_DECODED_MB', '0'],
    ['ANTHROPIC_BASE_URL', 'not a url'],
    ['OPENAI_BASE_URL', 'ftp://example.test/v1'],
    ['TIMELYGPT_BASE_URL', ''.padEnd(3, ' ')],
    ['LOG_LEVEL', 'loud'],
    ['INSPECT', 'maybe'],
    ['DEMO', '2'],
  ])('rejects %s=%j with a ConfigError naming the variable', (name, value) => {
    let caught: unknown;
    try {
      loadConfig({ [name]: value });
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(ConfigError);
    expect((caught as ConfigError).variable).toBe(name);
    expect((caught as ConfigError).message).toContain(name);
  });

  it('never echoes a REDIS_URL (it can hold a password) in its error', () => {
    expect(() => loadConfig({ REDIS_URL: 'http://:hunter2-secret@localhost:6379' })).toThrow(/REDIS_URL/);
    expect(() => loadConfig({ REDIS_URL: 'http://:hunter2-secret@localhost:6379' })).not.toThrow(/hunter2/);
  });

  it('drops unknown providers from PROVIDERS_DEFAULT_ORDER with a warning', () => {
    const config = loadConfig({ PROVIDERS_DEFAULT_ORDER: 'timelygpt,gemini,claude,claude' });
    expect(config.providersDefaultOrder).toEqual(['timelygpt', 'claude']);
    expect(config.warnings).toHaveLength(1);
    expect(config.warnings[0]).toContain('gemini');
  });

  it('falls back to the default order when PROVIDERS_DEFAULT_ORDER names no known provider', () => {
    const config = loadConfig({ PROVIDERS_DEFAULT_ORDER: 'gemini, mistral' });
    expect(config.providersDefaultOrder).toEqual(['claude', 'gpt', 'timelygpt']);
    expect(config.warnings.join('\n')).toContain('default');
  });

  it('reads BREAKER_MIN_DISTINCT_KEYS (1 to 100), and turns the quorum off when per-key health is off', () => {
    expect(loadConfig({ BREAKER_MIN_DISTINCT_KEYS: '3' }).breaker.minDistinctKeys).toBe(3);
    expect(loadConfig({ BREAKER_MIN_DISTINCT_KEYS: '1' }).breaker.minDistinctKeys).toBe(1);
    expect(() => loadConfig({ BREAKER_MIN_DISTINCT_KEYS: '0' })).toThrow(/BREAKER_MIN_DISTINCT_KEYS/);
    expect(() => loadConfig({ BREAKER_MIN_DISTINCT_KEYS: '101' })).toThrow(/BREAKER_MIN_DISTINCT_KEYS/);
    // No key circuits to stop a streak below the quorum: one key's streak opens the provider.
    expect(loadConfig({ BREAKER_MIN_DISTINCT_KEYS: '3', KEY_QUARANTINE_MS: '0' }).breaker.minDistinctKeys).toBe(1);
  });
});

describe('the derived limits (no variable of their own)', () => {
  it("keep the defaults the variables they replace had, on a machine of any size", () => {
    const config = loadConfig({});
    expect(config.admission).toMatchObject({ maxPerAddress: 32, retryAfterSeconds: 5, slotChars: 25_000 });
    expect(config.jobs.maxJobsPerAddress).toBe(100);
    expect(config.server).toMatchObject({ headersTimeoutMs: 10_000, connectionTimeoutMs: 600_000, keepAliveTimeoutMs: 72_000, sseMaxBufferBytes: 65_536 });
    expect(config.keyHealth.maxKeys).toBe(10_000);
    expect(config.pdf.maxTotalPages).toBe(10_000);
    // 16 uploads may wait per PDF worker: 16 on a 2-core machine (one worker).
    expect(config.pdf.queueMax).toBe(16 * config.pdf.workers);
    expect(loadConfig({ PDF_WORKERS: '3' }).pdf.queueMax).toBe(48);
  });

  it('follow the variables they derive from', () => {
    // One address: half the instance's generation slots, at least four clients' shares.
    expect(loadConfig({ MAX_INFLIGHT_GENERATIONS: '200' }).admission.maxPerAddress).toBe(100);
    expect(loadConfig({ MAX_INFLIGHT_GENERATIONS_PER_CLIENT: '20' }).admission.maxPerAddress).toBe(80);
    // One address: a tenth of the instance's jobs, at least five clients' shares.
    expect(loadConfig({ JOB_MAX_JOBS: '5000' }).jobs.maxJobsPerAddress).toBe(500);
    expect(loadConfig({ JOB_MAX_JOBS_PER_CLIENT: '40' }).jobs.maxJobsPerAddress).toBe(200);
    // Headers due within 10 s, never after the whole request.
    expect(loadConfig({ REQUEST_TIMEOUT_MS: '2000' }).server.headersTimeoutMs).toBe(2000);
    // A silent socket lives 10 min, or as long as a generation may wait: 3 providers × (3 calls of 300 s + 1 s + 2 s of backoff).
    expect(loadConfig({ PROVIDER_TIMEOUT_MS: '300000' }).server.connectionTimeoutMs).toBe(3 * (3 * 300_000 + 3000));
  });

  it('no longer reads the variables they replace', () => {
    const config = loadConfig({ PDF_QUEUE_MAX: '0', MAX_INFLIGHT_GENERATIONS_PER_ADDRESS: '1', ADMISSION_RETRY_AFTER_SECONDS: '9', SSE_MAX_BUFFER_BYTES: '2048' });
    expect(config.pdf.queueMax).toBeGreaterThan(0);
    expect(config.admission).toMatchObject({ maxPerAddress: 32, retryAfterSeconds: 5 });
    expect(config.server.sseMaxBufferBytes).toBe(65_536);
    // Each one set is named in a start-up warning, so an operator who set it learns it is ignored.
    expect(config.warnings).toHaveLength(4);
    for (const name of ['PDF_QUEUE_MAX', 'MAX_INFLIGHT_GENERATIONS_PER_ADDRESS', 'ADMISSION_RETRY_AFTER_SECONDS', 'SSE_MAX_BUFFER_BYTES']) {
      expect(config.warnings.some((warning) => warning.startsWith(`${name} is no longer read`))).toBe(true);
    }
    expect(loadConfig({ PDF_QUEUE_MAX: '' }).warnings).toEqual([]);
  });
});

describe('the effective configuration at start-up', () => {
  const adminToken = 'admin-token-logged-never-0001';

  it('is logged once at info, with the values in force and no secret', async () => {
    const lines: string[] = [];
    const stream = new Writable({
      write(chunk: Buffer | string, _encoding, callback) {
        lines.push(...chunk.toString().split('\n').filter((line) => line !== ''));
        callback();
      },
    });
    const salt = 'fingerprint-salt-never-logged-01';
    const service = await startService(
      loadConfig({ PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', ADMIN_TOKEN: adminToken, KEY_FINGERPRINT_SALT: salt, MAX_TEXT_CHARS: '12345' }),
      { log: { stream } },
    );
    try {
      const logged = lines.map((line) => JSON.parse(line) as { level: number; msg: string; config?: Record<string, unknown> });
      const configLines = logged.filter((entry) => entry.config !== undefined);
      expect(configLines).toHaveLength(1);
      const [entry] = configLines;
      expect(entry?.level).toBe(30); // pino's info
      expect(entry?.config).toMatchObject({ port: 0, maxTextChars: 12345, adminToken: 'set', redisUrl: 'unset', admission: { maxPerAddress: 32 } });
      const text = lines.join('\n');
      expect(text).not.toContain(adminToken);
      expect(text).not.toContain(salt);
    } finally {
      await service.close();
    }
  });

  it("masks REDIS_URL's password and says only whether ADMIN_TOKEN is set", () => {
    const logged = JSON.stringify(loggableConfig(loadConfig({ REDIS_URL: 'redis://user:hunter2-secret@redis.test:6379/0', ADMIN_TOKEN: adminToken })));
    expect(logged).not.toContain('hunter2');
    expect(logged).not.toContain(adminToken);
    expect(logged).toContain('redis://user:***@redis.test:6379/0');
    expect(JSON.stringify(loggableConfig(loadConfig({})))).toContain('"adminToken":"unset"');
  });
});
