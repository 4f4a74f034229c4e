/**
 * `node --expose-gc --import tsx scripts/heap-growth.ts [requests per round] [rounds]`: the service and the
 * emulator in this process, `POST /v1/generate` (gpt, notes) from 20 connections, the heap after GC read
 * after each round. A heap that grows round after round keeps something per request: write two heap
 * snapshots (HEAP_SNAPSHOTS=dir) and compare the objects by constructor in Chrome's DevTools (Comparison).
 * The overhead bench's growth run says the same over 100,000 requests in another process; this is the
 * quick look, in one process, when that run finds a slope.
 */
import { writeHeapSnapshot } from 'node:v8';
import { join } from 'node:path';
import { loadConfig } from '../src/config.js';
import { startEmulator } from '../src/emulator/index.js';
import { startService } from '../src/http/service.js';

const perRound = Number(process.argv[2] ?? 2000);
const rounds = Number(process.argv[3] ?? 4);
const snapshots = process.env['HEAP_SNAPSHOTS'];
const collect = (globalThis as { gc?: () => void }).gc;
if (collect === undefined) throw new Error('Run with node --expose-gc');

const emulator = await startEmulator();
const service = await startService(
  loadConfig({
    PORT: '0',
    LOG_LEVEL: 'silent',
    OPENAI_BASE_URL: emulator.openaiBaseUrl,
    GPT_MODEL: 'gpt-bench',
    PROVIDERS_DEFAULT_ORDER: 'gpt',
    // One client on one address drives every request: its shares and rate would refuse most of them.
    RATE_LIMIT_GENERATIONS: '0',
    MAX_INFLIGHT_GENERATIONS: '256',
    MAX_INFLIGHT_GENERATIONS_PER_CLIENT: '256',
  }),
  { log: { level: 'silent' } },
);
const body = JSON.stringify({
  task: 'notes',
  text: 'Photosynthesis converts light energy into chemical energy stored in glucose. Chlorophyll absorbs mostly blue and red light.',
  providers: ['gpt'],
  options: { lang: 'en' },
});

async function round(requests: number): Promise<number> {
  let sent = 0;
  await Promise.all(
    Array.from({ length: 20 }, async () => {
      while (sent < requests) {
        sent += 1;
        const response = await fetch(`${service.url}/v1/generate`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-gpt-key': 'heap-growth-fake-key-0001' },
          body,
        });
        await response.text();
        if (response.status !== 200) throw new Error(`POST /v1/generate answered ${response.status}`);
      }
    }),
  );
  for (let i = 0; i < 3; i += 1) {
    collect?.();
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return process.memoryUsage().heapUsed / 2 ** 20;
}

await round(500);
const heaps: number[] = [];
for (let index = 0; index < rounds; index += 1) {
  heaps.push(await round(perRound));
  process.stdout.write(`after ${(index + 1) * perRound} requests: heap after GC ${heaps.at(-1)?.toFixed(2)} MiB\n`);
  if (snapshots !== undefined && (index === 0 || index === rounds - 1)) writeHeapSnapshot(join(snapshots, `round-${index + 1}.heapsnapshot`));
}
const first = heaps[0] ?? 0;
const last = heaps.at(-1) ?? 0;
process.stdout.write(`growth: ${(((last - first) / ((rounds - 1) * perRound)) * 100_000).toFixed(1)} MiB per 100,000 requests\n`);
await service.close();
await emulator.close();
