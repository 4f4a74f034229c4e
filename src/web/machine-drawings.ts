/**
 * What `GET /web/machines.json` serves: every machine diagram that `npm run docs:machines` generated from
 * the machine definitions (docs/machines/<name>.mmd), in the order and with the titles of the generated
 * docs/machines/README.md, each as its state tree, its edges and a laid-out drawing (./machine-layout.ts).
 * The files are read on every request (a regenerated diagram shows without a restart), and a drawing is
 * laid out once per distinct diagram text, in a worker thread (./layout-worker.ts): the layout is the one
 * costly step (0.1–2 s of CPU for all of them, once per process) and never runs on the event loop.
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseStateDiagram } from './machine-diagram.js';
import type { MachineDiagram } from './machine-diagram.js';
import type { DrawnMachine } from './machine-layout.js';
import { startWorker, workerEntry } from '../threads/worker-entry.js';

/** One machine as the page gets it. */
export interface MachineDrawing extends MachineDiagram {
  /** The generator's title (docs/machines/README.md), or the name when the README does not list it. */
  readonly title: string;
  readonly drawing: DrawnMachine;
}

const diagramFile = /^([a-z0-9][a-z0-9-]{0,63})\.mmd$/;
/** A row of the README's table: `| title | source | [name.mmd](name.mmd) | … |`. */
const readmeRow = /^\|\s*(.+?)\s*\|[^|]*\|\s*\[([a-z0-9-]+)\.mmd\]\(/;

/** Titles in the README's order: name → title. */
function readmeTitles(readme: string): Map<string, string> {
  const titles = new Map<string, string>();
  for (const line of readme.split('\n')) {
    const row = readmeRow.exec(line);
    if (row?.[1] !== undefined && row[2] !== undefined) titles.set(row[2], row[1]);
  }
  return titles;
}

/** Longest a layout worker may run before it is stopped and the request fails (then the next one retries). */
const layoutTimeoutMs = 30_000;

/** Lays out `diagrams` in a worker thread, in order. */
export function layoutInWorker(diagrams: readonly MachineDiagram[]): Promise<DrawnMachine[]> {
  return new Promise((resolve, reject) => {
    const worker = startWorker(workerEntry('layout-worker', import.meta.url), {
      workerData: diagrams,
      resourceLimits: { maxOldGenerationSizeMb: 256 },
    });
    let settled = false;
    const finish = (error: Error | undefined, drawn?: DrawnMachine[]): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      void worker.terminate();
      if (error === undefined && drawn !== undefined) resolve(drawn);
      else reject(error ?? new Error('The layout worker ended without an answer.'));
    };
    const timer = setTimeout(() => finish(new Error(`The machine layout took over ${layoutTimeoutMs} ms.`)), layoutTimeoutMs);
    // Neither holds the process open: a service that stops while a layout runs just stops.
    timer.unref();
    worker.unref();
    worker.once('message', (drawn: DrawnMachine[]) => finish(undefined, drawn));
    worker.once('error', (error) => finish(error));
    worker.once('exit', () => finish(undefined));
  });
}

export interface MachineDrawingsOptions {
  /** Lays out a batch (default: {@link layoutInWorker}). */
  readonly layout?: typeof layoutInWorker;
  /** After a failed layout, requests fail at once for this long before one tries again (default 60 s), so a
   *  diagram that cannot be laid out does not cost a worker per request. */
  readonly retryAfterMs?: number;
  readonly now?: () => number;
}

/** Returns a function that reads, parses and (once per distinct text) lays out every diagram in `directory`. */
export function machineDrawings(directory: string, options: MachineDrawingsOptions = {}): () => Promise<MachineDrawing[]> {
  const { layout = layoutInWorker, retryAfterMs = 60_000, now = Date.now } = options;
  const laidOut = new Map<string, { text: string; drawing: Promise<DrawnMachine> }>();
  let failedAt: number | undefined;
  return async () => {
    let entries: string[];
    try {
      entries = await readdir(directory);
    } catch {
      return [];
    }
    const titles = readmeTitles(await readFile(join(directory, 'README.md'), 'utf8').catch(() => ''));
    const order = [...titles.keys()];
    const rank = (name: string): number => (order.includes(name) ? order.indexOf(name) : order.length);
    const names = entries
      .map((entry) => diagramFile.exec(entry)?.[1])
      .filter((name): name is string => name !== undefined)
      .sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
    const diagrams: { diagram: MachineDiagram; text: string }[] = [];
    for (const name of names) {
      try {
        const text = await readFile(join(directory, `${name}.mmd`), 'utf8');
        diagrams.push({ diagram: parseStateDiagram(name, text), text });
      } catch {
        // Removed between readdir and read: not drawn.
      }
    }
    // Every diagram not yet laid out (or changed) goes to one worker.
    const missing = diagrams.filter(({ diagram, text }) => laidOut.get(diagram.name)?.text !== text);
    if (missing.length > 0) {
      if (failedAt !== undefined && now() - failedAt < retryAfterMs) throw new Error('The machine diagrams could not be laid out; trying again later.');
      const batch = layout(missing.map(({ diagram }) => diagram));
      batch.catch(() => {
        failedAt = now();
      });
      missing.forEach(({ diagram, text }, index) => {
        const drawing = batch.then((drawn) => {
          const one = drawn[index];
          if (one === undefined) throw new Error(`No layout came back for ${diagram.name}.`);
          return one;
        });
        // A failed layout is forgotten, so the next request tries again.
        drawing.catch(() => {
          if (laidOut.get(diagram.name)?.drawing === drawing) laidOut.delete(diagram.name);
        });
        laidOut.set(diagram.name, { text, drawing });
      });
    }
    const machines: MachineDrawing[] = [];
    for (const { diagram } of diagrams) {
      const cached = laidOut.get(diagram.name);
      if (cached === undefined) continue;
      machines.push({ ...diagram, title: titles.get(diagram.name) ?? diagram.name, drawing: await cached.drawing });
    }
    return machines;
  };
}
