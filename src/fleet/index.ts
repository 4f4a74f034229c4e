export { connectFleet } from './fleet.js';
export type { Fleet } from './fleet.js';
