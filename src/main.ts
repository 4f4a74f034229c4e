/** `npm start`: the service from the environment (API.md "Configuration"). */
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

const service = await startService(config);
closeOnSignals(service);
