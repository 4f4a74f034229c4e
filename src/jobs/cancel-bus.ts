import { Redis } from 'ioredis';

/**
 * How a cancel reaches the instance that runs the job (REDIS_URL): `DELETE /v1/jobs/:id` on an instance
 * that does not hold the job's actor publishes the job id; every instance hears it, and the one that
 * runs the job cancels it there. Only job ids travel; never a key.
 */
export interface JobCancelBus {
  /** Asks every instance to cancel `jobId`. Rejects when the bus is unreachable. */
  publish(jobId: string): Promise<void>;
  /** Calls `listener` with every job id any instance asked to cancel. Returns the unsubscribe. */
  subscribe(listener: (jobId: string) => void): () => void;
  close(): Promise<void>;
}

export interface RedisJobCancelBusOptions {
  /** REDIS_URL: the bus keeps one subscriber connection of its own. */
  readonly url: string;
  /** REDIS_PREFIX; the channel is `<prefix>jobs:cancel`. */
  readonly prefix: string;
  /** The command connection that publishes (fails fast while Redis is down). */
  readonly client: Redis;
}

/** Longest job id passed on (the routes accept at most 200 characters). */
const maxJobIdChars = 200;

/** The cancel bus through Redis pub/sub; the subscriber reconnects and resubscribes on its own. */
export function createRedisJobCancelBus(options: RedisJobCancelBusOptions): JobCancelBus {
  const channel = `${options.prefix}jobs:cancel`;
  const listeners = new Set<(jobId: string) => void>();
  const subscriber = new Redis(options.url, {
    connectTimeout: 1000,
    autoResubscribe: true,
    retryStrategy: (times: number) => Math.min(50 * 2 ** Math.min(times, 6), 2000),
  });
  subscriber.on('error', () => undefined);
  subscriber.on('message', (from: string, jobId: string) => {
    if (from !== channel || jobId.length === 0 || jobId.length > maxJobIdChars) return;
    for (const listener of listeners) listener(jobId);
  });
  // On every (re)connection, so a bus started while Redis was down still subscribes once it is up.
  subscriber.on('ready', () => {
    subscriber.subscribe(channel).catch(() => undefined);
  });
  return {
    async publish(jobId) {
      await options.client.publish(channel, jobId);
    },
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    async close() {
      listeners.clear();
      subscriber.disconnect();
    },
  };
}
