export { createTimelyGptAdapter } from './adapter.js';
export type { TimelyGptAdapter } from './adapter.js';
export { classifyTimelyGptError } from './classify.js';
export { TimelyGptHttpError } from './errors.js';
export { TokenCache } from './token-cache.js';
