/**
 * Streaming: what reading the study material as it is written gains and costs, each figure a
 * ratio of two variants measured in the same run (alternating, medians over rounds):
 *
 * 1. **Time to first item** against time to the whole answer, at the same emulator speed (tokens per
 *    second, `BENCH_TOKENS_PER_SECOND`): the same notes request (gpt) as `Accept: text/event-stream`, timed
 *    to its first `item` event, and as JSON, timed to its whole answer.
 * 2. **Time to detect a stalled provider**: Claude stalls after 10 chunks (the emulator's `stall` fault) and
 *    GPT answers; the stalled attempt's `durationMs` with `STREAM_IDLE_TIMEOUT_MS` against the same with
 *    only `PROVIDER_TIMEOUT_MS` catching it (idle timeout above it). Scaled down from the defaults (20 s vs
 *    60 s) to `BENCH_STALL_IDLE_MS` vs `BENCH_PROVIDER_TIMEOUT_MS`, the same 1:3.
 * 3. **CPU per request, streamed vs not**: the whole service in this process (`startService`) against the
 *    emulator in its own process, emulator speed 0; CPU of this process per request (process.cpuUsage):
 *    SSE against JSON (both read a streamed upstream), and GPT (streamed upstream) against TimelyGPT (whose
 *    API answers whole), both JSON.
 * 4. **Extractor**: `StudyItemExtractor` over a 50 KB notes answer in 16-character deltas, against the whole
 *    answer's own validation, which every answer pays anyway (CPU µs per KB).
 */
import { loadConfig } from '../src/config.js';
import { startService } from '../src/http/service.js';
import { StudyItemExtractor } from '../src/study/stream-items.js';
import { validateStudyAnswer } from '../src/study/validate.js';
import { loadAverage, median, round, writeBenchSection } from './report.js';
import { benchText, claudeKey, gptKey, resetFaults, serviceEnv, setFault, startEmulatorChild } from './support/index.js';

const rounds = Number(process.env.BENCH_ROUNDS ?? 5);
const requestsPerRound = Number(process.env.BENCH_REQUESTS ?? 60);
const tokensPerSecond = Number(process.env.BENCH_TOKENS_PER_SECOND ?? 200);
const stallIdleMs = Number(process.env.BENCH_STALL_IDLE_MS ?? 2000);
const stallDeadlineMs = Number(process.env.BENCH_PROVIDER_TIMEOUT_MS ?? 6000);
const stallRounds = Number(process.env.BENCH_STALL_ROUNDS ?? 3);
const timelyKey = 'bench-fake-timelygpt-key-0001';

function notesAnswer(kilobytes: number, lang: 'en' | 'ko'): string {
  const word = lang === 'en' ? 'photosynthesis converts light energy' : '광합성은 빛 에너지를 화학 에너지로 바꾼다';
  const keyConcepts = [];
  const sections = [];
  for (let index = 0; JSON.stringify({ keyConcepts, sections }).length < kilobytes * 1024; index += 1) {
    keyConcepts.push({ id: `c${index + 1}`, term: `${word.split(' ')[0]} ${index}`, definition: `${word} "${index}" {quoted} [brackets], ${word}.`, importance: 'high' });
    sections.push({ title: `${word.split(' ')[1]} ${index}`, summary: `${word} ${word}`, bullets: [word, `${word} ${index}`] });
  }
  return JSON.stringify({ keyConcepts, sections, glossary: [] });
}

function cpuMicros<T>(run: () => T): { micros: number; value: T } {
  const start = process.cpuUsage();
  const value = run();
  const used = process.cpuUsage(start);
  return { micros: used.user + used.system, value };
}

function feed(text: string, pieceChars: number): number {
  const extractor = new StudyItemExtractor({ task: 'notes' });
  let items = 0;
  for (let at = 0; at < text.length; at += pieceChars) items += extractor.push(text.slice(at, at + pieceChars)).length;
  return items;
}

type Row = [string, string, string, string];

/**
 * µs per KB of a 50 KB notes answer in `lang` (under the notes answer ceiling, 64 Ki characters, past which
 * validation refuses at once): the extractor over 16-character deltas, and whole-answer validation.
 */
function extractorRow(lang: 'en' | 'ko'): Row {
  const text = notesAnswer(50, lang);
  const kb = Buffer.byteLength(text) / 1024;
  const measure = (run: () => unknown): number => median(Array.from({ length: 7 }, () => cpuMicros(run).micros)) / kb;
  const pieces16 = measure(() => feed(text, 16));
  const validation = measure(() => validateStudyAnswer('notes', { text, model: 'm', usage: { inputTokens: null, outputTokens: null }, truncated: false }));
  return [`extractor, 16-char deltas vs whole-answer validation (µs/KB, ${round(kb, 0)} KB ${lang})`, round(pieces16, 1), round(validation, 1), `${round(pieces16 / validation, 2)}×`];
}

type Emulator = Awaited<ReturnType<typeof startEmulatorChild>>;

async function setSpeed(emulator: Emulator, speed: number): Promise<void> {
  const response = await fetch(`${emulator.url}/_emulator/speed`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ tokensPerSecond: speed }) });
  if (!response.ok) throw new Error(`emulator refused speed ${speed}: ${response.status}`);
}

const notesBody = JSON.stringify({ task: 'notes', text: benchText, options: { lang: 'en' } });

/**
 * One POST; resolves with ms to the first `item` event (streamed) or to the whole answer, and the body.
 * A streamed answer is read to its end either way (the request finishes before the next starts).
 */
async function timedPost(url: string, headers: Record<string, string>, stream: boolean, body = notesBody): Promise<{ firstItemMs: number; wholeMs: number; text: string }> {
  const start = performance.now();
  const response = await fetch(`${url}/v1/generate`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers, ...(stream ? { accept: 'text/event-stream' } : {}) },
    body,
  });
  let text = '';
  let firstItemMs = Number.NaN;
  if (response.body !== null) {
    const decoder = new TextDecoder();
    const reader = response.body.getReader();
    for (let read = await reader.read(); !read.done; read = await reader.read()) {
      text += decoder.decode(read.value, { stream: true });
      if (Number.isNaN(firstItemMs) && text.includes('event: item')) firstItemMs = performance.now() - start;
    }
  }
  const wholeMs = performance.now() - start;
  if (response.status !== 200 || (stream && !text.includes('event: done'))) throw new Error(`unexpected answer ${response.status}: ${text.slice(0, 200)}`);
  if (stream && Number.isNaN(firstItemMs)) throw new Error('a streamed answer without an item');
  return { firstItemMs, wholeMs, text };
}

/** Time to the first item (SSE) against time to the whole answer (JSON), same request, same emulator speed. */
async function firstItemRow(emulator: Emulator): Promise<Row> {
  const service = await startService(loadConfig(serviceEnv(emulator, { PROVIDERS_DEFAULT_ORDER: 'gpt' })), { log: { level: 'silent' } });
  try {
    await setSpeed(emulator, tokensPerSecond);
    await timedPost(service.url, { 'x-gpt-key': gptKey }, true); // warm-up
    const first: number[] = [];
    const whole: number[] = [];
    for (let index = 0; index < rounds; index += 1) {
      first.push((await timedPost(service.url, { 'x-gpt-key': gptKey }, true)).firstItemMs);
      whole.push((await timedPost(service.url, { 'x-gpt-key': gptKey }, false)).wholeMs);
    }
    const ratio = first.map((value, index) => value / (whole[index] ?? value));
    return [`first item (SSE) vs whole answer (JSON), ms at ${tokensPerSecond} tokens/s`, round(median(first), 0), round(median(whole), 0), `${round(median(ratio), 2)}×`];
  } finally {
    await setSpeed(emulator, 0);
    await service.close();
  }
}

/** The stalled Claude attempt's duration: with the stream idle timeout, and with only the call's deadline. */
async function stallRow(emulator: Emulator): Promise<Row> {
  const start = (idleMs: number) =>
    startService(
      loadConfig(serviceEnv(emulator, { PROVIDERS_DEFAULT_ORDER: 'claude,gpt', RETRY_MAX: '0', PROVIDER_TIMEOUT_MS: String(stallDeadlineMs), STREAM_IDLE_TIMEOUT_MS: String(idleMs), BREAKER_FAILURE_THRESHOLD: '1000' })),
      { log: { level: 'silent' } },
    );
  const withIdle = await start(stallIdleMs);
  const deadlineOnly = await start(stallDeadlineMs * 2);
  const headers = { 'x-claude-key': claudeKey, 'x-gpt-key': gptKey };
  const detected = async (url: string): Promise<number> => {
    await setFault(emulator.url, { provider: 'claude', fault: 'stall', after: 10, count: 1 });
    const { text } = await timedPost(url, headers, false);
    const attempt = (JSON.parse(text) as { meta: { attempts: { provider: string; errorClass?: string; durationMs: number }[] } }).meta.attempts[0];
    if (attempt?.provider !== 'claude' || attempt.errorClass !== 'timeout') throw new Error(`the stall was not caught as a timeout: ${JSON.stringify(attempt)}`);
    return attempt.durationMs;
  };
  try {
    const idle: number[] = [];
    const deadline: number[] = [];
    for (let index = 0; index < stallRounds; index += 1) {
      idle.push(await detected(withIdle.url));
      deadline.push(await detected(deadlineOnly.url));
    }
    return [`stalled provider detected (ms): STREAM_IDLE_TIMEOUT_MS=${stallIdleMs} vs PROVIDER_TIMEOUT_MS=${stallDeadlineMs}`, round(median(idle), 0), round(median(deadline), 0), `${round(median(idle) / median(deadline), 2)}×`];
  } finally {
    await resetFaults(emulator.url);
    await withIdle.close();
    await deadlineOnly.close();
  }
}

/** CPU of this process per request (ms): SSE vs JSON through GPT, and GPT (streamed upstream) vs TimelyGPT (whole), JSON. */
async function cpuRows(emulator: Emulator): Promise<Row[]> {
  const service = await startService(loadConfig(serviceEnv(emulator)), { log: { level: 'silent' } });
  const variants = {
    gptJson: { headers: { 'x-gpt-key': gptKey }, stream: false },
    gptSse: { headers: { 'x-gpt-key': gptKey }, stream: true },
    timelyJson: { headers: { 'x-timelygpt-key': timelyKey }, stream: false },
  } as const;
  const perRequest = async (variant: keyof typeof variants): Promise<number> => {
    const { headers, stream } = variants[variant];
    const start = process.cpuUsage();
    for (let index = 0; index < requestsPerRound; index += 1) await timedPost(service.url, headers, stream);
    const used = process.cpuUsage(start);
    return (used.user + used.system) / requestsPerRound / 1000;
  };
  try {
    const names = Object.keys(variants) as (keyof typeof variants)[];
    for (let index = 0; index < 10; index += 1) for (const name of names) await timedPost(service.url, variants[name].headers, variants[name].stream); // warm-up
    const cpu: Record<keyof typeof variants, number[]> = { gptJson: [], gptSse: [], timelyJson: [] };
    for (let index = 0; index < rounds; index += 1) for (const name of names) cpu[name].push(await perRequest(name));
    const ratio = (a: number[], b: number[]) => `${round(median(a.map((value, index) => value / (b[index] ?? value))), 2)}×`;
    return [
      ['CPU per request (ms): SSE vs JSON, GPT streaming upstream', round(median(cpu.gptSse), 2), round(median(cpu.gptJson), 2), ratio(cpu.gptSse, cpu.gptJson)],
      ['CPU per request (ms): GPT streamed vs TimelyGPT whole, JSON', round(median(cpu.gptJson), 2), round(median(cpu.timelyJson), 2), ratio(cpu.gptJson, cpu.timelyJson)],
    ];
  } finally {
    await service.close();
  }
}

const loadAtStart = loadAverage();
const emulator = await startEmulatorChild();
const rows: Row[] = [];
try {
  for (const row of [await firstItemRow(emulator), await stallRow(emulator), ...(await cpuRows(emulator)), extractorRow('en')]) {
    rows.push(row);
    process.stdout.write(`| ${row.join(' | ')} |\n`);
  }
} finally {
  await emulator.stop();
}
writeBenchSection({
  bench: 'streaming',
  title: 'Streaming: first item, stall detection, CPU',
  settings: `\`BENCH_ROUNDS\`=${rounds}, \`BENCH_REQUESTS\`=${requestsPerRound}, \`BENCH_TOKENS_PER_SECOND\`=${tokensPerSecond}, \`BENCH_STALL_ROUNDS\`=${stallRounds}`,
  loadAtStart,
  measures: 'Each row: variant A against variant B of the same run (medians; the ratio is A/B, per round where paired).',
  columns: ['measure', 'A', 'B', 'A/B'],
  rows,
  note: 'Upstream streaming costs CPU per chunk (the SDK parses each SSE event; each piece is one event to the call actor): compare GPT against TimelyGPT, whose API answers whole.',
});
