/**
 * Streaming (issue 25): what reading the study material as it is written costs.
 *
 * 1. **Extractor, linear**: `StudyItemExtractor` over notes answers of 25–400 KB (English and Korean), fed in
 *    16-character deltas (a model's token is 2–6 characters; providers send a few per event), in 1-character
 *    deltas (the worst split), and whole; against the whole answer's own validation (`validateStudyAnswer`:
 *    JSON.parse, normalize, zod, checks), which every answer pays anyway. µs per KB must not grow with size.
 * 2. **CPU per request, streamed vs not**: the whole service in this process (`startService`) against the
 *    emulator in its own process; the same notes request as JSON and as `Accept: text/event-stream`,
 *    alternating, sequential; CPU of this process per request (process.cpuUsage), medians over rounds.
 *
 * Time to first item and time to detect a stall need the adapters to stream from the emulator (issue 25
 * item 1, the providers' part): until then every answer arrives whole and the first item comes with it.
 */
import { loadConfig } from '../src/config.js';
import { startService } from '../src/http/service.js';
import { StudyItemExtractor } from '../src/study/stream-items.js';
import { validateStudyAnswer } from '../src/study/validate.js';
import { loadAverage, machineInfo, median, round, writeBenchmarkSection } from './report.js';
import { benchText, gptKey, serviceEnv, startEmulatorChild } from './support/index.js';

const rounds = Number(process.env.BENCH_ROUNDS ?? 5);
const requestsPerRound = Number(process.env.BENCH_REQUESTS ?? 60);

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

function extractorRows(): string[] {
  const rows: string[] = [];
  for (const lang of ['en', 'ko'] as const) {
    for (const kilobytes of [25, 50, 100, 200, 400]) {
      const text = notesAnswer(kilobytes, lang);
      const kb = Buffer.byteLength(text) / 1024;
      const measure = (run: () => unknown): number => median(Array.from({ length: 7 }, () => cpuMicros(run).micros)) / kb;
      const whole = measure(() => feed(text, text.length));
      const pieces16 = measure(() => feed(text, 16));
      const pieces1 = measure(() => feed(text, 1));
      const validation = measure(() => validateStudyAnswer('notes', { text, model: 'm', usage: { inputTokens: null, outputTokens: null }, truncated: false }));
      const items = feed(text, 16);
      rows.push(`| ${lang} | ${round(kb, 0)} | ${items} | ${round(whole, 1)} | ${round(pieces16, 1)} | ${round(pieces1, 1)} | ${round(validation, 1)} |`);
      process.stdout.write(`${rows.at(-1)}\n`);
    }
  }
  return rows;
}

async function requestRows(): Promise<string[]> {
  const emulator = await startEmulatorChild();
  const config = loadConfig(serviceEnv(emulator, { PROVIDERS_DEFAULT_ORDER: 'gpt' }));
  const service = await startService(config, { log: { level: 'silent' } });
  const body = JSON.stringify({ task: 'notes', text: benchText, options: { lang: 'en' } });
  const post = async (stream: boolean): Promise<void> => {
    const response = await fetch(`${service.url}/v1/generate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-gpt-key': gptKey, ...(stream ? { accept: 'text/event-stream' } : {}) },
      body,
    });
    const text = await response.text();
    if (response.status !== 200 || (stream && !text.includes('event: done'))) throw new Error(`unexpected answer ${response.status}: ${text.slice(0, 200)}`);
  };
  const perRequest = async (stream: boolean): Promise<number> => {
    const start = process.cpuUsage();
    for (let index = 0; index < requestsPerRound; index += 1) await post(stream);
    const used = process.cpuUsage(start);
    return (used.user + used.system) / requestsPerRound;
  };
  try {
    for (let index = 0; index < 20; index += 1) await post(index % 2 === 0); // warm-up
    const json: number[] = [];
    const streamed: number[] = [];
    for (let roundIndex = 0; roundIndex < rounds; roundIndex += 1) {
      json.push(await perRequest(false));
      streamed.push(await perRequest(true));
    }
    const differences = json.map((value, index) => (streamed[index] ?? value) - value);
    const rows = [
      `| JSON | ${round(median(json) / 1000, 2)} | |`,
      `| text/event-stream | ${round(median(streamed) / 1000, 2)} | ${round(median(differences) / 1000, 2)} |`,
    ];
    process.stdout.write(`${rows.join('\n')}\n`);
    return rows;
  } finally {
    await service.close();
    await emulator.stop();
  }
}

const extractor = extractorRows();
const requests = await requestRows();
writeBenchmarkSection(
  'streaming',
  [
    `Measured ${new Date().toISOString().slice(0, 16)}Z on ${machineInfo()}, load ${loadAverage()}. Reproduce: \`npm run bench -- streaming\`.`,
    '',
    'Items extracted from a notes answer as it grows (`StudyItemExtractor`), CPU µs per KB of answer (medians of 7):',
    '',
    '| lang | KB | items | whole at once | 16-char deltas | 1-char deltas | whole-answer validation |',
    '| --- | --- | --- | --- | --- | --- | --- |',
    ...extractor,
    '',
    `CPU of the service per notes request (ms, this process; medians of ${rounds} rounds of ${requestsPerRound} sequential requests, gpt through the emulator):`,
    '',
    '| answer | CPU ms / request | streamed − JSON |',
    '| --- | --- | --- |',
    ...requests,
    '',
    'Time to first item against time to the whole answer, and time to detect a stalled provider against',
    '`PROVIDER_TIMEOUT_MS`, need the adapters to stream (issue 25 item 1): not measured yet.',
  ].join('\n'),
);
