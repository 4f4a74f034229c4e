import { assign, setup } from 'xstate';
import type { CountedErrorClass, IgnoredErrorClass } from '../errors/index.js';
import { openStrategies, type OpenStrategyName } from './breaker-strategy.js';

/** What a provider actor gives its breaker when it spawns it. */
export interface BreakerInput {
  readonly providerId: string;
  /** Counted failures that open the breaker (default 5). */
  readonly threshold: number;
  /** How long the breaker stays open before it admits one probe (default 60 000 ms). */
  readonly recoveryMs: number;
  readonly strategy?: OpenStrategyName;
}

export interface BreakerContext {
  readonly providerId: string;
  readonly threshold: number;
  readonly recoveryMs: number;
  readonly strategy: OpenStrategyName;
  readonly consecutiveFailures: number;
  /** Epoch ms when the breaker last opened; null while closed. */
  readonly openedAt: number | null;
  /** Epoch ms from which one probe is admitted; null while closed or forced open. */
  readonly retryAt: number | null;
  /** The call admitted as the half-open probe, whose result alone decides. */
  readonly probeCallId: string | null;
  readonly opens: number;
}

/**
 * Events are typed by error class: only a provider-side class can be a counted failure
 * (`call.failed`); every other class arrives as `call.ignored` and can never move the count.
 */
export type BreakerEvent =
  | { type: 'call.started'; callId: string; at: number }
  | { type: 'call.succeeded'; callId: string; at: number }
  | { type: 'call.failed'; callId: string; errorClass: CountedErrorClass; at: number }
  | { type: 'call.ignored'; callId: string; errorClass: IgnoredErrorClass; at: number }
  | { type: 'breaker.reset'; at: number }
  | { type: 'breaker.forceOpen'; at: number }
  | { type: 'breaker.release'; at: number };

/**
 * The circuit breaker of one provider. Admission is read by the provider actor through the
 * `admitting` tag: closed admits every call, half-open admits exactly one probe, open admits none.
 */
export const breakerMachine = setup({
  types: {
    input: {} as BreakerInput,
    context: {} as BreakerContext,
    events: {} as BreakerEvent,
  },
  guards: {
    /** The failure being recorded brings the failure record to the strategy's limit. */
    isThresholdReached: ({ context }) =>
      openStrategies[context.strategy].shouldOpen(
        { consecutiveFailures: context.consecutiveFailures + 1 },
        context.threshold,
      ),
    /** The result belongs to the call admitted as this half-open window's probe. */
    isProbeResult: ({ context, event }) => 'callId' in event && event.callId === context.probeCallId,
  },
  actions: {
    countFailure: assign({ consecutiveFailures: ({ context }) => context.consecutiveFailures + 1 }),
    clearFailures: assign({ consecutiveFailures: 0, openedAt: null, retryAt: null, probeCallId: null }),
    markOpened: assign({
      openedAt: ({ event }) => event.at,
      retryAt: ({ context, event }) => event.at + context.recoveryMs,
      probeCallId: null,
      opens: ({ context }) => context.opens + 1,
    }),
    markForcedOpen: assign({
      openedAt: ({ event }) => event.at,
      retryAt: null,
      probeCallId: null,
      opens: ({ context }) => context.opens + 1,
    }),
    holdProbe: assign({ probeCallId: ({ event }) => ('callId' in event ? event.callId : null) }),
    freeProbe: assign({ probeCallId: null }),
  },
  delays: {
    recoveryTimeout: ({ context }) => context.recoveryMs,
  },
}).createMachine({
  id: 'breaker',
  context: ({ input }) => ({
    providerId: input.providerId,
    threshold: input.threshold,
    recoveryMs: input.recoveryMs,
    strategy: input.strategy ?? 'consecutiveFailures',
    consecutiveFailures: 0,
    openedAt: null,
    retryAt: null,
    probeCallId: null,
    opens: 0,
  }),
  initial: 'closed',
  on: {
    'breaker.reset': { target: '.closed', actions: 'clearFailures' },
    'breaker.release': { target: '.closed', actions: 'clearFailures' },
    'breaker.forceOpen': { target: '.forcedOpen', actions: 'markForcedOpen' },
  },
  states: {
    /** Normal operation: every call is admitted; counted failures add up, a success clears them. */
    closed: {
      tags: ['admitting'],
      on: {
        'call.succeeded': { actions: 'clearFailures' },
        'call.failed': [
          { guard: 'isThresholdReached', target: 'open', actions: ['countFailure', 'markOpened'] },
          { actions: 'countFailure' },
        ],
      },
    },
    /** Calls are refused without touching the network until the recovery time has passed. */
    open: {
      after: { recoveryTimeout: 'halfOpen' },
    },
    /** Held open by an operator (maintenance) until released; no timer moves it. */
    forcedOpen: {},
    /** Recovery window: exactly one probe at a time decides between closed and open. */
    halfOpen: {
      initial: 'awaitingProbe',
      states: {
        /** The probe slot is free: the next call is admitted as the probe. */
        awaitingProbe: {
          tags: ['admitting'],
          on: { 'call.started': { target: 'probing', actions: 'holdProbe' } },
        },
        /** One probe is in flight; everything else is refused until it ends. */
        probing: {
          on: {
            'call.succeeded': { guard: 'isProbeResult', target: '#breaker.closed', actions: 'clearFailures' },
            'call.failed': {
              guard: 'isProbeResult',
              target: '#breaker.open',
              // The count stays at the threshold that opened it: bounded, and still true.
              actions: 'markOpened',
            },
            /** A user-side class or an abort proves nothing about the provider: free the slot. */
            'call.ignored': { guard: 'isProbeResult', target: 'awaitingProbe', actions: 'freeProbe' },
          },
        },
      },
    },
  },
});

export type BreakerMachine = typeof breakerMachine;
