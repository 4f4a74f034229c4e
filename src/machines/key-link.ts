import { fromCallback } from 'xstate';
import type { SharedKeyHealth } from './key-health.machine.js';
import type { ProviderId } from './types.js';

/** What a provider's key book gives the link between it and the fleet store. */
export interface KeyLinkInput {
  readonly providerId: ProviderId;
}

/** What the key book tells its link: a key's health changed here; the fleet should hold it too. */
export type KeyLinkEvent = { type: 'key.report'; keyId: string; shared: SharedKeyHealth; at: number };

/** What the link answers: another instance changed a key's health. */
export type KeyLinkReply = { type: 'key.synced'; keyId: string; shared: SharedKeyHealth; at: number };

/**
 * The embedded default (no `REDIS_URL`): no fleet, so the link never answers and each instance knows
 * only what its own calls taught it. `createKeyLink` (src/fleet) replaces it through `.provide`.
 */
export const embeddedKeyLink = fromCallback<KeyLinkEvent, KeyLinkInput, KeyLinkReply>(() => undefined);
