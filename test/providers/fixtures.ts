/** Test plumbing: one emulator and the three adapters pointed at it. */
import type { ServerResponse } from 'node:http';
import { afterAll, beforeAll, beforeEach } from 'vitest';
import { startEmulator, type Emulator, type FaultSpec } from '../../src/emulator/index.js';
import { createClaudeAdapter, createGptAdapter, createTimelyGptAdapter } from '../../src/providers/index.js';
import type { ProviderAdapter, ProviderId } from '../../src/providers/index.js';

export interface Rig {
  readonly emulator: Emulator;
  readonly adapters: Record<ProviderId, ProviderAdapter>;
}

export async function startRig(): Promise<Rig> {
  const emulator = await startEmulator({ slowMs: 50 });
  return {
    emulator,
    adapters: {
      claude: createClaudeAdapter({ baseUrl: emulator.anthropicBaseUrl, model: 'claude-emu-1' }),
      gpt: createGptAdapter({ baseUrl: emulator.openaiBaseUrl, model: 'gpt-emu-1' }),
      timelygpt: createTimelyGptAdapter({ baseUrl: emulator.timelygptBaseUrl, model: 'timely-emu-1', tokenTtlMs: 3_300_000 }),
    },
  };
}

/**
 * One rig for the enclosing suite: started before its tests, closed after them, and `reset` run on its
 * emulator before each test. Read `.rig` inside the tests.
 */
export function useRig(reset: (emulator: Emulator) => void): { readonly rig: Rig } {
  let rig: Rig | undefined;
  beforeAll(async () => {
    rig = await startRig();
  });
  afterAll(async () => {
    await rig?.emulator.close();
  });
  beforeEach(() => reset(startedRig(rig).emulator));
  return {
    get rig() {
      return startedRig(rig);
    },
  };
}

function startedRig(rig: Rig | undefined): Rig {
  if (rig === undefined) throw new Error('the rig starts in beforeAll');
  return rig;
}

/** Writes `chunk` `count` times as the client takes them (waiting for `drain`: back-pressure kept), then ends. */
export function writeChunks(response: ServerResponse, chunk: Buffer, count: number): void {
  let sent = 0;
  const more = (): void => {
    while (sent < count && !response.destroyed) {
      sent += 1;
      if (!response.write(chunk)) {
        response.once('drain', more);
        return;
      }
    }
    response.end();
  };
  more();
}

/** Sets a fault through the real control endpoint, as the demo and benchmarks do. */
export async function postFault(emulator: Emulator, spec: FaultSpec): Promise<void> {
  const response = await fetch(`${emulator.url}/_emulator/faults`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(spec),
  });
  if (!response.ok) throw new Error(`fault not accepted: ${await response.text()}`);
}

/** The rejection of a promise that must reject. */
export async function rejectionOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected the call to fail, it succeeded');
}
