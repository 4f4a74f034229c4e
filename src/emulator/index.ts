export { startEmulator } from './server.js';
export type { Emulator, EmulatorOptions } from './server.js';
export { faultNames, emulatedProviders } from './faults.js';
export type { FaultName, FaultSpec, EmulatedProvider, EmulatorStats, ProviderCounters } from './faults.js';
