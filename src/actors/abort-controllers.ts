import { getEventListeners } from 'node:events';

/**
 * Abort controllers kept for reuse. A controller's `signal` is dear to make (`createAbortSignal`
 * re-prototypes an `EventTarget`, which V8 then keeps in dictionary mode), a sizeable share of what the
 * provider actor adds to a call (`npm run bench -- core`, docs/performance.md), while the controller itself
 * costs nothing. A controller comes back only as good as new: its signal never aborted, with no
 * `abort` listener left on it (whoever listened for this call has let go: undici removes its listener
 * when a request completes; an `onabort` handler counts as one); any other is dropped for the garbage
 * collector. So a reused signal can fire for its new owner only, and holds nothing of the call before.
 */
export interface AbortControllers {
  /** A controller whose signal has not aborted and that nobody listens to. */
  take(): AbortController;
  /** Hands a controller back once its call has settled; kept only if it is as good as new. */
  giveBack(controller: AbortController): void;
  /** Controllers kept now (tests). */
  readonly size: number;
}

export function createAbortControllers(limit = 256): AbortControllers {
  const spare: AbortController[] = [];
  return {
    take: () => spare.pop() ?? new AbortController(),
    giveBack(controller) {
      if (spare.length >= limit) return;
      const { signal } = controller;
      // An `onabort` handler is one of the signal's `abort` listeners too.
      if (signal.aborted || getEventListeners(signal, 'abort').length > 0) return;
      spare.push(controller);
    },
    get size() {
      return spare.length;
    },
  };
}
