import { fromCallback } from 'xstate';
import type { KeyLinkEvent, KeyLinkInput, KeyLinkReply } from '../machines/key-link.js';
import type { SharedKeyStore } from './key-health-store.js';

export interface KeyLinkOptions {
  /** The most refused keys read back from the fleet at (re)connection (10 000 in the service). */
  readonly maxKeys: number;
  readonly now?: () => number;
}

/**
 * The link between one provider's key book and the fleet store: every key change made here is written
 * (a record that expires with the refusal) and published; every change made elsewhere, and at
 * (re)connection every refused key the fleet holds, comes back as `key.synced` for the book to adopt
 * (read once the store hears the fleet's changes, so none falls between the read and the subscription).
 * While Redis is unreachable each instance keeps what its own calls teach it.
 */
export function createKeyLink(store: SharedKeyStore, options: KeyLinkOptions) {
  const now = options.now ?? Date.now;
  return fromCallback<KeyLinkEvent, KeyLinkInput, KeyLinkReply>(({ input, receive, sendBack }) => {
    const { providerId } = input;
    let stopped = false;
    const adopt = (keyId: string, shared: KeyLinkReply['shared']): void => {
      if (!stopped) sendBack({ type: 'key.synced', keyId, shared, at: now() });
    };
    const load = (): void => {
      store.load(providerId, options.maxKeys).then(
        (records) => records.forEach(([keyId, shared]) => adopt(keyId, shared)),
        () => undefined,
      );
    };
    const unsubscribe = store.subscribe(providerId, adopt);
    // Read back only once listening: a change published between the read and the subscription would be lost.
    const unwatch = store.onListening(load);
    if (store.isListening()) load();
    receive((event) => {
      if (!store.isUp()) return;
      store.write(providerId, event.keyId, event.shared, event.at).catch(() => undefined);
    });
    return () => {
      stopped = true;
      unsubscribe();
      unwatch();
    };
  });
}
