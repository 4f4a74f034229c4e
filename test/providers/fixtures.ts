/** Test plumbing: one emulator and the three adapters pointed at it. */
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
