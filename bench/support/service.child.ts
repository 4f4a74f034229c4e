/**
 * The study-helper service in its own process (bench), configured from the environment the parent
 * passes (PORT=0, the emulator's base URLs, LOG_LEVEL, breaker settings). Reports its CPU and memory.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { loadConfig } from '../../src/config.js';
import { startService } from '../../src/http/service.js';
import { serveParent } from './child-ipc.js';

const config = loadConfig(process.env);
const service = await startService(config, { log: { level: config.logLevel } });
// The service's own event-loop delay, for the benches that ask (`loopDelay`, reset on request).
const loopDelay = monitorEventLoopDelay({ resolution: 5 });
loopDelay.enable();
serveParent(
  { url: service.url },
  {
    loopDelay: async (message) => {
      const value = { p99Ms: loopDelay.percentile(99) / 1e6, maxMs: loopDelay.max / 1e6 };
      if (message['reset'] === true) loopDelay.reset();
      return value;
    },
    close: async () => {
      await service.close();
      return {};
    },
  },
);
