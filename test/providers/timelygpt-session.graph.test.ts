import { createActor, fromPromise, getNextTransitions, toPromise } from 'xstate';
import { getSimplePaths } from 'xstate/graph';
import { describe, expect, it } from 'vitest';
import { errorPolicy } from '../../src/errors/index.js';
import {
  isExpiredTokenError,
  timelyGptSessionMachine,
  type CompleteChatInput,
  type TimelyCompletion,
} from '../../src/machines/timelygpt-session.machine.js';
import { classifyTimelyGptError, TimelyGptHttpError } from '../../src/providers/timelygpt/index.js';
import type { TimelyGptEndpoint } from '../../src/providers/timelygpt/errors.js';
import { UnexpectedResponseError, UpstreamAbortError } from '../../src/providers/upstream-errors.js';
import { Secret } from '../../src/security/secret.js';

/**
 * Model-based: every path through the TimelyGPT token flow, driven by what its invoked actors can
 * answer. Property (docs/errors.md): no path on which either endpoint answered 401 ends in a class that
 * counts toward the breaker; a 401 from llm-completion re-authenticates exactly once.
 */
type SessionSnapshot = ReturnType<typeof timelyGptSessionMachine.transition>;
interface ActorEvent {
  readonly type: string;
  readonly output?: unknown;
  readonly error?: unknown;
}

function httpError(endpoint: TimelyGptEndpoint, status: number): TimelyGptHttpError {
  return new TimelyGptHttpError(endpoint, status, { success: false, error: 'x', message: `status ${status}`, statusCode: status }, new Headers());
}

function failuresOf(endpoint: TimelyGptEndpoint): unknown[] {
  return [
    ...[401, 402, 403, 429, 500, 503].map((status) => httpError(endpoint, status)),
    new UnexpectedResponseError('{"type":"error"} inside a 2xx'),
    Object.assign(new TypeError('fetch failed'), { cause: Object.assign(new Error('reset'), { code: 'ECONNRESET' }) }),
    new UpstreamAbortError(new DOMException('deadline', 'TimeoutError')),
    new UpstreamAbortError(new DOMException('gone', 'AbortError')),
  ];
}

const completion = { text: '{}', model: 'timely', inputTokens: null, outputTokens: null };

/** Events as a function of the snapshot (docs/testing.md graph-test pitfall 1): what the running actor can answer. */
function eventsFor(snapshot: SessionSnapshot): ActorEvent[] {
  const types = [...new Set(getNextTransitions(snapshot).map((transition) => transition.eventType))];
  return types.flatMap((type): ActorEvent[] => {
    const [, kind, , id] = type.split('.');
    const endpoint: TimelyGptEndpoint = id === 'authenticate' || id === 'reauthenticate' ? 'authenticate' : 'completion';
    if (kind === 'done') return [{ type, output: endpoint === 'authenticate' ? `token-${id}` : completion }];
    if (kind === 'error') return failuresOf(endpoint).map((error) => ({ type, error }));
    return [];
  });
}

function describeError(error: unknown): string {
  if (error instanceof TimelyGptHttpError) return `${error.endpoint}:${error.status}`;
  if (error instanceof UpstreamAbortError) return error.timedOut ? 'deadline' : 'abort';
  return error instanceof Error ? error.name : String(error);
}

function is401(event: ActorEvent): boolean {
  return event.error instanceof TimelyGptHttpError && event.error.status === 401;
}

describe('timelyGptSessionMachine graph', () => {
  const paths = getSimplePaths(timelyGptSessionMachine, {
    input: { apiKey: new Secret('test-timely-key-0001'), signal: new AbortController().signal },
    events: (snapshot) => eventsFor(snapshot) as never[],
    serializeState: (snapshot) => `${JSON.stringify(snapshot.value)}|${snapshot.context.token}|${describeError(snapshot.context.error)}`,
    serializeEvent: (event) => `${event.type}|${describeError((event as ActorEvent).error)}`,
  });

  it('explores every path (counts pinned so an emptied model fails)', () => {
    // One path per distinct end state: the start; authenticate's 10 failures; generating; generate's
    // 9 final failures (its 401 re-authenticates); reauthenticating and its 10 failures; regenerating
    // and its 10 failures; succeeded after generate and after regenerate.
    expect(paths).toHaveLength(1 + 10 + 1 + 9 + 1 + 10 + 1 + 10 + 2);
  });

  it('no path whose failures are all 401s (from either endpoint) ends in a class that counts toward the breaker', () => {
    const only401s = paths.filter((path) => {
      const errors = path.steps.map((step) => step.event as ActorEvent).filter((event) => event.type.startsWith('xstate.error.'));
      return path.state.value === 'failed' && errors.length > 0 && errors.every(is401);
    });
    // authenticate 401; generate 401 then reauthenticate 401; generate 401 then regenerate 401.
    expect(only401s).toHaveLength(3);
    for (const path of only401s) {
      const output = path.state.output;
      const failure = classifyTimelyGptError(output?.status === 'failed' ? output.error : undefined);
      expect(failure.errorClass, JSON.stringify(path.steps.map((s) => s.event.type))).toBe('auth');
      expect(errorPolicy[failure.errorClass].breaker).toBe('ignored');
    }
  });

  it('a failed path ends with the class of its last failure, never of a 401 before it', () => {
    const failed = paths.filter((path) => path.state.value === 'failed');
    expect(failed).toHaveLength(10 + 9 + 10 + 10);
    for (const path of failed) {
      const errors = path.steps.map((step) => step.event as ActorEvent).filter((event) => event.type.startsWith('xstate.error.'));
      const output = path.state.output;
      expect(output?.status === 'failed' ? output.error : undefined).toBe(errors.at(-1)?.error);
    }
  });

  it('a 401 from llm-completion re-authenticates, and only once', () => {
    for (const path of paths) {
      const events = path.steps.map((step) => step.event as ActorEvent);
      const completionCalls = events.filter((event) => /actor\.(generate|regenerate)$/.test(event.type)).length;
      expect(completionCalls).toBeLessThanOrEqual(2);
      const first = events.findIndex((event) => event.type === 'xstate.error.actor.generate' && is401(event));
      if (first >= 0) expect(path.steps[first]?.state.value).toBe('reauthenticating');
    }
  });

  it('a 401 from authenticate is auth at once, without a completion call', () => {
    const authPaths = paths.filter((path) => {
      const first = path.steps.find((step) => step.event.type !== 'xstate.init')?.event as ActorEvent | undefined;
      return first?.type === 'xstate.error.actor.authenticate' && is401(first);
    });
    expect(authPaths).toHaveLength(1);
    const output = authPaths[0]?.state.output;
    expect(classifyTimelyGptError(output?.status === 'failed' ? output.error : undefined).errorClass).toBe('auth');
  });
});

const sessionInput = { apiKey: new Secret('test-timely-key-0001'), signal: new AbortController().signal };

async function outputOf(machine: typeof timelyGptSessionMachine) {
  const actor = createActor(machine, { input: sessionInput });
  const done = toPromise(actor);
  actor.start();
  return done;
}

function errorMessageOf(output: Awaited<ReturnType<typeof outputOf>>): string {
  return output.status === 'failed' && output.error instanceof Error ? output.error.message : '';
}

describe('timelyGptSessionMachine without its actors', () => {
  it('fails loud, naming the actor to provide, instead of answering', async () => {
    expect(errorMessageOf(await outputOf(timelyGptSessionMachine))).toBe(
      'timelyGptSessionMachine: provide the acquireToken actor implementation',
    );
    const tokenOnly = timelyGptSessionMachine.provide({ actors: { acquireToken: fromPromise(async () => 'token') } });
    expect(errorMessageOf(await outputOf(tokenOnly))).toBe(
      'timelyGptSessionMachine: provide the completeChat actor implementation',
    );
  });
});

describe('timelyGptSessionMachine: names and the error it ends with', () => {
  it('names the machine, starts authenticating, and names each invoked call (what inspectors show)', () => {
    expect(timelyGptSessionMachine.id).toBe('timelyGptSession');
    expect(timelyGptSessionMachine.config.initial).toBe('authenticating');
    const invokeIds = Object.fromEntries(
      Object.entries(timelyGptSessionMachine.root.states).map(([name, node]) => [name, node.invoke.map((invoke) => invoke.id)]),
    );
    expect(invokeIds).toEqual({
      authenticating: ['authenticate'],
      generating: ['generate'],
      reauthenticating: ['reauthenticate'],
      regenerating: ['regenerate'],
      succeeded: [],
      failed: [],
    });
  });

  it('ends with the error of a failed re-authentication (a bad key after an expired token)', async () => {
    const refused = httpError('authenticate', 401);
    let exchanges = 0;
    const machine = timelyGptSessionMachine.provide({
      actors: {
        acquireToken: fromPromise(async () => {
          exchanges += 1;
          if (exchanges > 1) throw refused;
          return 'token-1';
        }),
        completeChat: fromPromise<TimelyCompletion, CompleteChatInput>(async () => {
          throw httpError('completion', 401);
        }),
      },
    });
    const output = await outputOf(machine);
    expect(output).toEqual({ status: 'failed', error: refused });
  });
});

describe('isExpiredTokenError: only llm-completion\'s 401', () => {
  it.each<[string, unknown, boolean]>([
    ['completion 401', { status: 401, endpoint: 'completion' }, true],
    ['authenticate 401 (a bad key)', { status: 401, endpoint: 'authenticate' }, false],
    ['completion 403', { status: 403, endpoint: 'completion' }, false],
    ['a status as text', { status: '401', endpoint: 'completion' }, false],
    ['no endpoint', { status: 401 }, false],
    ['no status', { endpoint: 'completion' }, false],
    ['null', null, false],
    ['undefined', undefined, false],
    ['a string', 'completion 401', false],
    ['a number', 401, false],
  ])('%s', (_label, error, expected) => {
    expect(isExpiredTokenError(error)).toBe(expected);
  });
});
