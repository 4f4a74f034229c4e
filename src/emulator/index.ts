export { startEmulator } from './server.js';
export type { Emulator, EmulatorOptions } from './server.js';
export type { FaultName, FaultSpec } from './faults.js';
