/** `npm run emulator`: the provider emulator on its own (port from EMULATOR_PORT, default 4010). */
import { startEmulator } from './server.js';

const port = Number(process.env['EMULATOR_PORT'] ?? 4010);
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  console.error(`EMULATOR_PORT must be a port number, got ${JSON.stringify(process.env['EMULATOR_PORT'])}`);
  process.exit(1);
}
const host = process.env['EMULATOR_HOST'] ?? '127.0.0.1';
const tokensPerSecond = Number(process.env['EMULATOR_TOKENS_PER_SECOND'] ?? 0);
if (!Number.isFinite(tokensPerSecond) || tokensPerSecond < 0 || tokensPerSecond > 1_000_000) {
  console.error(
    `EMULATOR_TOKENS_PER_SECOND must be a number from 0 to 1000000, got ${JSON.stringify(process.env['EMULATOR_TOKENS_PER_SECOND'])}`,
  );
  process.exit(1);
}
const streamPieces = Number(process.env['EMULATOR_STREAM_PIECES'] ?? 0);
if (!Number.isInteger(streamPieces) || streamPieces < 0 || streamPieces > 1_000_000) {
  console.error(
    `EMULATOR_STREAM_PIECES must be a whole number from 0 to 1000000, got ${JSON.stringify(process.env['EMULATOR_STREAM_PIECES'])}`,
  );
  process.exit(1);
}
const emulator = await startEmulator({ port, host, tokensPerSecond, streamPieces });

console.log(`provider emulator listening on ${emulator.url}
  ANTHROPIC_BASE_URL=${emulator.anthropicBaseUrl}
  OPENAI_BASE_URL=${emulator.openaiBaseUrl}
  TIMELYGPT_BASE_URL=${emulator.timelygptBaseUrl}
  control: POST/DELETE ${emulator.url}/_emulator/faults, POST ${emulator.url}/_emulator/speed, POST ${emulator.url}/_emulator/pieces, GET ${emulator.url}/_emulator/stats`);

const stop = (): void => {
  emulator.close().then(
    () => process.exit(0),
    () => process.exit(1),
  );
};
process.once('SIGINT', stop);
process.once('SIGTERM', stop);
