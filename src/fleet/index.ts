export { connectFleet } from './fleet.js';
export type { Fleet, FleetOptions } from './fleet.js';
export { createFleetLink } from './fleet-link.js';
export type { FleetLinkOptions } from './fleet-link.js';
export { createRedisStateStore } from './redis-state-store.js';
export type {
  BreakerSettings,
  FleetBreakerOperation,
  FleetBreakerResult,
  RedisStateStore,
  RedisStateStoreOptions,
  SharedBreakerStore,
} from './redis-state-store.js';
