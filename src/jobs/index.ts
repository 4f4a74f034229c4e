export { createJobRegistry, JobCapacityError, JobNotResumableError } from './registry.js';
export { keysMatch } from './record.js';
export type { JobRegistry, JobRegistryOptions, JobSpec } from './registry.js';
export type { JobTrace, JobTracer } from './stage-actor.js';
export { createMemoryJobStatusStore, JobStoreUnavailableError } from './status-store.js';
export { claimJobsDirectory, createFileJobStatusStore } from './file-status-store.js';
export type { JobStatusStore } from './status-store.js';
export { jobStatuses, jobStages, isFinalStatus, jobCacheKey } from './types.js';
export type { JobView, JobStreamEvent } from './types.js';
// The Redis cancel bus itself is imported by src/fleet only: ioredis loads only with REDIS_URL.
export type { JobCancelBus } from './cancel-bus.js';
export { createAddressClients } from './address-clients.js';
