/**
 * The worker_threads entry that lays out machine diagrams off the main event loop (./machine-drawings.ts):
 * elkjs computes synchronously, hundreds of ms to seconds for the larger diagrams on a busy machine, so
 * the service never runs it on the thread that answers requests. Gets `MachineDiagram[]` as workerData,
 * posts back the `DrawnMachine[]` in the same order, and ends.
 */
import { parentPort, workerData } from 'node:worker_threads';
import type { MachineDiagram } from './machine-diagram.js';
import { layoutMachine } from './machine-layout.js';
import type { DrawnMachine } from './machine-layout.js';

const diagrams = workerData as MachineDiagram[];
const drawn: DrawnMachine[] = [];
for (const diagram of diagrams) drawn.push(await layoutMachine(diagram));
parentPort?.postMessage(drawn);
