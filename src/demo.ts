/**
 * `npm run demo`: the provider emulator on a free loopback port and the service wired to it, so the whole
 * thing runs without a key, an account or the internet. Any key works except the emulator's fault
 * prefixes (`emu-bad-`, `emu-ratelimit-`, `emu-quota-`, `emu-forbidden-`).
 */
import { ConfigError, loadConfig } from './config.js';
import type { Config } from './config.js';
import { startEmulator } from './emulator/index.js';
import { closeOnSignals, startService } from './http/service.js';

const emulator = await startEmulator({ host: '127.0.0.1', port: 0 });

let config: Config;
try {
  config = loadConfig({
    ...process.env,
    ANTHROPIC_BASE_URL: emulator.anthropicBaseUrl,
    OPENAI_BASE_URL: emulator.openaiBaseUrl,
    TIMELYGPT_BASE_URL: emulator.timelygptBaseUrl,
    // A breaker you can watch open and recover within a minute (override any of them in the environment).
    // The demo has one user with one key per provider, so the quorum of distinct keys is 1: the provider
    // breaker itself opens, as the page's fault panel shows (the service's default asks for 2 keys).
    BREAKER_FAILURE_THRESHOLD: process.env.BREAKER_FAILURE_THRESHOLD || '3',
    BREAKER_RECOVERY_MS: process.env.BREAKER_RECOVERY_MS || '15000',
    BREAKER_MIN_DISTINCT_KEYS: process.env.BREAKER_MIN_DISTINCT_KEYS || '1',
    DEMO: 'true',
  });
} catch (error) {
  await emulator.close();
  if (error instanceof ConfigError) {
    console.error(error.message);
    process.exit(1);
  }
  throw error;
}

const service = await startService(config, { demo: { emulatorUrl: emulator.url } });
closeOnSignals(service, { onClosed: () => emulator.close() });

console.log(`
study-helper demo — open this in a browser:

    ${service.url}/

  The page is prefilled with emulator keys (no key, account or internet needed): upload a PDF, watch the
  progress, take the quiz; the fault panel takes a provider down so you can watch the fallback, its
  breaker open (after ${config.breaker.threshold} failures) and recover (${Math.round(config.breaker.recoveryMs / 1000)} s later).
  Providers emulated at ${emulator.url}
  API docs:  ${service.url}/docs
  providers: curl ${service.url}/v1/providers

Generate notes through Claude, falling back to GPT (the emulator accepts any key):
  curl -s ${service.url}/v1/generate \\
    -H 'content-type: application/json' \\
    -H 'x-claude-key: demo-claude-key-0001' -H 'x-gpt-key: demo-gpt-key-0001' \\
    -d '{"task":"notes","text":"Photosynthesis turns light energy into chemical energy stored in glucose.","options":{"lang":"en"}}'

Make Claude fail and watch the fallback (meta.fallback, meta.attempts):
  curl -s -X POST ${emulator.url}/_emulator/faults -H 'content-type: application/json' -d '{"provider":"claude","fault":"http503"}'
  curl -s -X DELETE ${emulator.url}/_emulator/faults

Ctrl-C stops both.
`);
