/**
 * The demo on loopback for the web tests: the emulator plus the real service wired to it (demo mode),
 * each on a free port. Nothing leaves 127.0.0.1; the keys are the page's fake demo keys.
 */
import { loadConfig } from '../../src/config.js';
import { startEmulator } from '../../src/emulator/index.js';
import type { Emulator } from '../../src/emulator/index.js';
import { startService } from '../../src/http/service.js';
import type { Service } from '../../src/http/service.js';

export interface Demo {
  readonly emulator: Emulator;
  readonly service: Service;
  readonly url: string;
  close(): Promise<void>;
}

export async function startDemo(env: NodeJS.ProcessEnv = {}): Promise<Demo> {
  const emulator = await startEmulator({ host: '127.0.0.1', port: 0 });
  const config = loadConfig({
    LOG_LEVEL: 'silent',
    PORT: '0',
    HOST: '127.0.0.1',
    ANTHROPIC_BASE_URL: emulator.anthropicBaseUrl,
    OPENAI_BASE_URL: emulator.openaiBaseUrl,
    TIMELYGPT_BASE_URL: emulator.timelygptBaseUrl,
    DEMO: 'true',
    // Workers at the process's priority on the oversubscribed test machine (test/http/support.ts says why).
    WORKER_NICE: '0',
    ...env,
  });
  const service = await startService(config, { demo: { emulatorUrl: emulator.url }, log: { level: 'silent' } });
  return {
    emulator,
    service,
    url: service.url,
    async close() {
      await service.close();
      await emulator.close();
    },
  };
}

/** Reads Server-Sent Events from `url` until `until` returns true for one of them (or the time runs out). */
export async function readEvents(
  url: string,
  until: (event: { event: string; data: unknown }) => boolean,
  timeoutMs = 10_000,
): Promise<{ event: string; data: unknown }[]> {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), timeoutMs);
  const seen: { event: string; data: unknown }[] = [];
  try {
    const response = await fetch(url, { signal: controller.signal });
    if (response.body === null) throw new Error('no body');
    const decoder = new TextDecoder();
    let buffer = '';
    const reader = response.body.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let end = buffer.indexOf('\n\n');
      while (end !== -1) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        end = buffer.indexOf('\n\n');
        const event = /^event: (.*)$/m.exec(block)?.[1];
        const data = /^data: (.*)$/m.exec(block)?.[1];
        if (event === undefined || data === undefined) continue;
        const parsed = { event, data: JSON.parse(data) as unknown };
        seen.push(parsed);
        if (until(parsed)) return seen;
      }
    }
    return seen;
  } catch (error) {
    if (controller.signal.aborted) throw new Error(`No matching event within ${timeoutMs} ms; saw ${JSON.stringify(seen.map((e) => e.event))}`, { cause: error });
    throw error;
  } finally {
    clearTimeout(timer);
    controller.abort();
  }
}
