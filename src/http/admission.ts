/**
 * Admission control: a bounded number of `POST /v1/generate` slots per instance, and a
 * per-client share of them, so one client cannot take every slot. A run takes slots by the size of its
 * text (one per `slotChars` characters, at least one, at most the client's share): the main-thread work
 * of a run (body, prompts, answers) grows with its text, so a client sending long texts gets fewer of
 * them in flight than one sending short ones. A refusal is an `ApiError` carrying `retryAfterSeconds`;
 * the error handler mirrors it in the `Retry-After` header.
 */
import { hash, randomBytes } from 'node:crypto';
import { providerIds } from '../providers/index.js';
import type { ApiKey, ProviderId } from '../providers/index.js';
import { createAddressClients } from '../jobs/index.js';
import { shareAddress } from './client-address.js';
import { ApiError, type Refusal } from './errors.js';

/** Per-process salt: a client id says nothing about the keys behind it, and means nothing elsewhere. */
const clientSalt = randomBytes(16).toString('hex');

/**
 * Who is asking, for the per-client shares and request rates (with the fleet's `salt` when the rates are
 * counted fleet-wide): a salted hash of the set of provider keys the request carries (the same keys in any order are the same client), or of the remote address when it carries
 * none. Never the key itself; the id is only compared, never logged. One `crypto.hash` call over one
 * string (every request makes one: a `createHash` object and its updates cost twice as much).
 */
export function clientIdOf(
  keys: Partial<Record<ProviderId, ApiKey>>,
  remoteAddress: string | undefined,
  salt: string = clientSalt,
): string {
  let material = '';
  for (const id of providerIds) {
    const key = keys[id];
    if (key !== undefined) material += `${id}\u0000${key.reveal()}\u0000`;
  }
  if (material === '')
    return `address:${hash('sha256', `${salt}${shareAddress(remoteAddress)}`).slice(0, 24)}`;
  return `keys:${hash('sha256', `${salt}${material}`).slice(0, 24)}`;
}

export interface AdmissionOptions {
  /** Runs in flight at once in this instance (MAX_INFLIGHT_GENERATIONS). */
  readonly maxInFlight: number;
  /** Runs one client may have in flight at once (MAX_INFLIGHT_GENERATIONS_PER_CLIENT). */
  readonly maxPerClient: number;
  /** What `Retry-After` says on a refusal (5 s in the service: `derivedLimits`). */
  readonly retryAfterSeconds: number;
  /** Characters of text per slot (25 000 in the service: `derivedLimits`); every run takes one slot when absent. */
  readonly slotChars?: number;
  /**
   * Slots the clients of one remote address may hold together (derived from the instance's and a client's): a
   * client is its key set, so one that invents a new key per request would otherwise count as many
   * clients and could take every slot of the instance. Unbounded when absent.
   */
  readonly maxPerAddress?: number;
  /** What the slots hold and the settings that bound them, for the refusals' messages (default: generations). */
  readonly labels?: AdmissionLabels;
  /**
   * Whether the instance is busy now (its event loop or CPU time: load-gauge.ts). While it is, the addresses
   * that held slots lately share them equally: an address holding slots that would pass an equal share of what
   * is in flight, rounded down (and 2 slots), is refused (429), so one address's runs cannot take the CPU
   * another's wait for. Never busy when absent.
   */
  readonly busy?: () => boolean;
}

/** The words of a refusal: what is counted, and the two settings that bound it. */
interface AdmissionLabels {
  /** Plural noun: "generations", "event streams". */
  readonly what: string;
  readonly perClientSetting: string;
  readonly totalSetting: string;
}

const generationLabels: AdmissionLabels = {
  what: 'generations',
  perClientSetting: 'MAX_INFLIGHT_GENERATIONS_PER_CLIENT',
  totalSetting: 'MAX_INFLIGHT_GENERATIONS',
};

export interface Admission {
  /**
   * Takes the slots of a run over `chars` characters for `clientId` (from `address`, a share address:
   * client-address.ts; once it holds more than `addressKeysAsOneClient` key sets, its clients share one
   * client's slots), or throws 503
   * `SERVER_BUSY` / 429 `TOO_MANY_REQUESTS`. Call the returned release once.
   */
  enter(clientId: string, chars?: number, address?: string): () => void;
  /**
   * Throws the refusal `enter` would throw for the smallest run: before the body is read, a client
   * whose share is already taken is answered without parsing what it sends.
   */
  checkRoom(clientId: string, address?: string): void;
  /** The slots a run over `chars` characters takes. */
  slotsFor(chars: number): number;
  /**
   * Whether addresses other than `address` hold slots now or took or gave one back lately (the addresses the
   * equal shares count): the job scheduler holds an address to one running job while they wait on a busy instance.
   */
  othersActive(address: string): boolean;
  /** Slots taken now, in all, and the clients holding them (metrics, tests). */
  inFlight(): { readonly total: number; readonly clients: number };
}

/** The `/v1/generate` slots of one instance. */
export function createAdmission(options: AdmissionOptions): Admission {
  const byClient = new Map<string, number>();
  const byAddress = new Map<string, number>();
  // An address's invented keys count as one client once it holds more than a few (src/jobs/address-clients.ts).
  const addressClients = createAddressClients();
  const shareOf = (clientId: string, address: string | undefined): string =>
    address === undefined ? clientId : addressClients.shareOf(clientId, address);
  const maxPerAddress = options.maxPerAddress ?? Number.POSITIVE_INFINITY;
  const labels = options.labels ?? generationLabels;
  let total = 0;
  const recent = createRecentAddresses(byAddress);
  const refusal = { retryAfterSeconds: options.retryAfterSeconds };
  // `studyhelper_refusals_total`'s `what`: the plural noun in snake case ("event_streams").
  const refusedWhat = labels.what.replaceAll(' ', '_');
  const refusedBy = (limit: Refusal['limit']): Refusal => ({ limit, what: refusedWhat });
  // The longest text still runs (alone): a run never takes more than a client's, an address's or the instance's slots.
  const mostSlots = Math.max(1, Math.min(options.maxPerClient, options.maxInFlight, maxPerAddress));
  const slotsFor = (chars: number): number =>
    options.slotChars === undefined
      ? 1
      : Math.min(mostSlots, Math.max(1, Math.ceil(chars / options.slotChars)));
  const check = (clientId: string, slots: number, address: string | undefined): number => {
    const mine = byClient.get(clientId) ?? 0;
    if (mine + slots > options.maxPerClient) {
      const needs =
        slots === 1
          ? ''
          : ` and this text needs ${slots} (one per ${options.slotChars} characters)`;
      throw new ApiError(
        'TOO_MANY_REQUESTS',
        `This client's ${labels.what} in flight hold ${mine} of its ${options.maxPerClient} slots (${labels.perClientSetting})${needs}; retry when one has finished.`,
        refusal,
        refusedBy('client_share'),
      );
    }
    const fromAddress = address === undefined ? 0 : (byAddress.get(address) ?? 0);
    if (fromAddress + slots > maxPerAddress) {
      throw new ApiError(
        'TOO_MANY_REQUESTS',
        `The clients of this address hold ${fromAddress} of its ${maxPerAddress} slots for ${labels.what} (the per-address share); retry when one has finished.`,
        refusal,
        refusedBy('address_share'),
      );
    }
    if (address !== undefined && fromAddress > 0 && options.busy?.() === true) {
      // Every address that held slots lately, this one included, gets an equal share of the slots in flight,
      // rounded down: rounded up, the address asking got the odd slot, and an address with many connections
      // is always the one asking (against one that holds 2, it held 3 and made half as many runs again).
      // An address holding nothing is never refused here: one request at a time, however many slots its text
      // needs, is what every address gets.
      const addresses = recent.count(address);
      const equalShare = Math.max(busyShareFloor, Math.floor((total + slots) / addresses));
      if (addresses > 1 && fromAddress + slots > equalShare) {
        throw new ApiError(
          'TOO_MANY_REQUESTS',
          `This instance is busy, and the clients of this address hold ${fromAddress} of the ${total} slots for ${labels.what} in flight, from ${addresses} addresses: while it is busy each address gets an equal share; retry when one has finished.`,
          refusal,
          refusedBy('busy_share'),
        );
      }
    }
    if (total + slots > options.maxInFlight) {
      throw new ApiError(
        'SERVER_BUSY',
        `Every slot for ${labels.what} of this instance is taken (${options.maxInFlight}, ${labels.totalSetting}); retry shortly.`,
        refusal,
        refusedBy('instance'),
      );
    }
    return mine;
  };
  return {
    enter(clientId, chars = 0, address) {
      const slots = slotsFor(chars);
      const share = shareOf(clientId, address);
      const mine = check(share, slots, address);
      total += slots;
      byClient.set(share, mine + slots);
      if (address !== undefined) {
        byAddress.set(address, (byAddress.get(address) ?? 0) + slots);
        addressClients.add(clientId, address);
        recent.touch(address);
      }
      let released = false;
      return () => {
        if (released) return;
        released = true;
        total -= slots;
        take(byClient, share, slots);
        if (address !== undefined) {
          take(byAddress, address, slots);
          addressClients.remove(clientId, address);
          recent.touch(address);
        }
      };
    },
    checkRoom(clientId, address) {
      check(shareOf(clientId, address), 1, address);
    },
    slotsFor,
    othersActive: (address) => recent.count(address) > 1,
    inFlight() {
      return { total, clients: byClient.size };
    },
  };
}

/**
 * Slots an address may always hold, busy or not: a client with one run in flight and the next on its way
 * is never refused for the equal shares; only an address holding more than this and more than the others
 * is.
 */
const busyShareFloor = 2;

/**
 * How long an address counts among those sharing the slots after it last took or gave one back: a client
 * sending one request after another holds nothing between them (its answer on the way, its next request
 * being parsed), and must not look gone to the equal shares in that moment.
 */
const recentAddressMs = 2_000;

/** The addresses that hold slots now or took or gave one back within `recentAddressMs`. */
function createRecentAddresses(holding: ReadonlyMap<string, number>): {
  touch(address: string): void;
  /** How many there are, counting `address` among them. */
  count(address: string): number;
} {
  const lastSeen = new Map<string, number>();
  let sweptAt = 0;
  return {
    touch(address) {
      lastSeen.set(address, performance.now());
    },
    count(address) {
      const now = performance.now();
      // At most one sweep each quarter of the window: the map holds the addresses of the last few seconds.
      if (now - sweptAt >= recentAddressMs / 4) {
        sweptAt = now;
        for (const [seen, at] of lastSeen) if (now - at > recentAddressMs && !holding.has(seen)) lastSeen.delete(seen);
      }
      return lastSeen.size + (lastSeen.has(address) ? 0 : 1);
    },
  };
}

/** Gives back `slots` of `holder` in `held`, forgetting a holder left with none. */
function take(held: Map<string, number>, holder: string, slots: number): void {
  const left = (held.get(holder) ?? slots) - slots;
  if (left <= 0) held.delete(holder);
  else held.set(holder, left);
}
