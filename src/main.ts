/** `npm start`: the service from the environment (docs/api.md "Configuration"). */
import cluster from 'node:cluster';
import { ConfigError, loadConfig } from './config.js';
import type { Config } from './config.js';
import { closeOnSignals, startService } from './http/service.js';

let config: Config;
try {
  config = loadConfig(process.env);
} catch (error) {
  if (error instanceof ConfigError) {
    console.error(error.message);
    process.exit(1);
  }
  throw error;
}

/**
 * WORKERS=n (default 1): n worker processes (node:cluster) share the port; with REDIS_URL they share
 * every breaker too (docs/fleet.md). Read here, before anything starts, because only the primary forks.
 */
const workersValue = process.env.WORKERS ?? '';
const workers = workersValue.trim() === '' ? 1 : Number(workersValue);
if (!Number.isInteger(workers) || workers < 1 || workers > 256) {
  console.error(`Invalid configuration: WORKERS must be a whole number from 1 to 256 (got ${JSON.stringify(workersValue)})`);
  process.exit(1);
}

if (workers > 1 && cluster.isPrimary) {
  if (config.redisUrl === undefined) {
    console.warn(`WORKERS=${workers} without REDIS_URL: each worker keeps its own breakers`);
  }
  let stopping = false;
  for (let index = 0; index < workers; index += 1) cluster.fork();
  cluster.on('exit', (worker, code, signal) => {
    if (stopping) return;
    console.error(`worker ${worker.process.pid ?? '?'} exited (${signal ?? code}); starting another`);
    cluster.fork();
  });
  const stop = (signal: NodeJS.Signals): void => {
    stopping = true;
    for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill(signal);
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
} else {
  const service = await startService(config);
  closeOnSignals(service);
}
