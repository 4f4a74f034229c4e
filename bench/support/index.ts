/** What the process-level benches (overhead, outage) share. */
export * from './topology.js';
export * from './emulator-control.js';
