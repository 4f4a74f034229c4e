// A hostile client in its own process (its own file limit): opens `count` connections from `from` to
// `port`, each a POST whose body never finishes, and keeps them. Reports on stdout as JSON lines:
// {"connected":n,"refused":n,"open":n} once every connection has been tried and has settled.
import { connect } from 'node:net';

const [port, from, countText] = process.argv.slice(2);
const count = Number(countText);
let connected = 0;
let refused = 0;
const sockets = [];

function one() {
  return new Promise((resolve) => {
    const socket = connect({ port: Number(port), host: '127.0.0.1', localAddress: from });
    sockets.push(socket);
    let settled = false;
    const settle = () => {
      if (!settled) {
        settled = true;
        resolve();
      }
    };
    socket.on('connect', () => {
      connected += 1;
      socket.write('POST /v1/generate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"task":');
      settle();
    });
    socket.on('error', () => {
      refused += 1;
      settle();
    });
    socket.on('close', settle);
    socket.setTimeout(20_000, () => socket.destroy());
  });
}

const batch = 500;
for (let started = 0; started < count; started += batch) {
  await Promise.all(Array.from({ length: Math.min(batch, count - started) }, one));
}
await new Promise((resolve) => setTimeout(resolve, 500));
const open = sockets.filter((socket) => !socket.destroyed).length;
process.stdout.write(`${JSON.stringify({ connected, refused, open })}\n`);
process.stdin.on('data', () => {});
process.stdin.on('end', () => process.exit(0));
