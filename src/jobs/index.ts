export { createJobRegistry, jobView, JobCapacityError, JobNotResumableError } from './registry.js';
export { interruptedRecord, keysMatch, publicView } from './record.js';
export type { JobRegistry, JobRegistryOptions, JobSpec, JobListener } from './registry.js';
export { createMemoryJobStatusStore, JobStoreUnavailableError } from './status-store.js';
export { claimJobsDirectory, createFileJobStatusStore, type FileJobStatusStoreOptions } from './file-status-store.js';
export type {
  JobStatusStore,
  JobPutOptions,
  JobPutResult,
  MemoryJobStatusStore,
  MemoryJobStatusStoreOptions,
} from './status-store.js';
export { jobStatuses, jobStages, isFinalStatus } from './types.js';
export type {
  JobStatus,
  JobStage,
  JobPosition,
  FinalJobStatus,
  JobResult,
  StageMeta,
  JobMeta,
  JobError,
  JobView,
  JobRecord,
  JobResumeData,
  FinishedPart,
  ProgressEvent,
  JobStreamEvent,
} from './types.js';
// The Redis cancel bus itself is imported by src/fleet only: ioredis loads only with REDIS_URL.
export type { JobCancelBus, RedisJobCancelBusOptions } from './cancel-bus.js';
export { addressKeysAsOneClient, createAddressClients } from './address-clients.js';
export type { AddressClients } from './address-clients.js';
