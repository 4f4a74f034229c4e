import type { TextPart } from './token-count.js';

/** Main thread → token worker: count the tokens of a text, or split it into parts within a budget. */
export type TokenRequest =
  | { readonly id: number; readonly kind: 'count'; readonly text: string }
  | { readonly id: number; readonly kind: 'split'; readonly text: string; readonly budgetTokens: number };

/** Token worker → main thread: one answer per request. */
export type TokenResponse =
  | { readonly id: number; readonly ok: true; readonly tokens: number }
  | { readonly id: number; readonly ok: true; readonly parts: TextPart[] }
  | { readonly id: number; readonly ok: false; readonly message: string };

/** The token worker's start-up data: its thread's nice value (WORKER_NICE). */
export interface TokenWorkerData {
  readonly nice: number;
}
