/**
 * The study-helper service in its own process (bench), configured from the environment the parent
 * passes (PORT=0, the emulator's base URLs, LOG_LEVEL, breaker settings). Reports its CPU and memory.
 */
import { loadConfig } from '../../src/config.js';
import { startService } from '../../src/http/service.js';
import { serveParent } from './child-ipc.js';

const config = loadConfig(process.env);
const service = await startService(config, { log: { level: config.logLevel } });
serveParent(
  { url: service.url },
  {
    close: async () => {
      await service.close();
      return {};
    },
  },
);
