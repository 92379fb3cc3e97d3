// bench/notifications' receivers, run as a child process (so their work is not counted as the
// service's, and does not wait on its event loop): real servers on loopback, one per behaviour, each
// on its own port. The parent asks over IPC:
//   {ask: 'ports'}           -> {healthy, answering, failing5xx, slow, tarpit, refusing}
//   {ask: 'secret', secret}  -> the healthy receiver verifies signatures with it from now on
//   {ask: 'take'}            -> what the healthy receiver got since the last take: [received at (ms
//                               since the epoch), state change -> receipt (ms)] pairs, how many ids came
//                               more than once, and how many failed verification; then forgets them
//   {ask: 'counts'}          -> connections and requests each other receiver got so far (`answering`
//                               answers 204 at once, as `healthy` does, and keeps nothing else)
import http from 'node:http';
import net from 'node:net';
import { Webhook } from 'standardwebhooks';

const SLOW_MS = Number(process.env.BENCH_SLOW_MS ?? 1000);
let verifier;
let got = [];
let seen = new Set();
let duplicates = 0;
let forged = 0;
const counts = {
  answering: { connections: 0, requests: 0 },
  failing5xx: { connections: 0, requests: 0 },
  slow: { connections: 0, requests: 0 },
  tarpit: { connections: 0 },
};

const listen = (server) =>
  new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server.address().port)));
const counting = (server, name) => {
  server.on('connection', () => counts[name].connections++);
  return server;
};

const healthy = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const at = Date.now();
    const raw = Buffer.concat(chunks).toString('utf8');
    try {
      verifier.verify(raw, req.headers);
    } catch {
      forged++;
    }
    const id = req.headers['webhook-id'];
    if (seen.has(id)) duplicates++;
    seen.add(id);
    got.push(at, at - Date.parse(JSON.parse(raw).timestamp));
    res.writeHead(204).end();
  });
});
/** A receiver that counts its connections and requests and answers each with `status` (after `delayMs`). */
const answeringWith = (name, status, body, delayMs = 0) =>
  counting(
    http.createServer((req, res) => {
      counts[name].requests++;
      req.resume();
      const reply = () => res.writeHead(status).end(body);
      req.on('end', () => (delayMs ? setTimeout(reply, delayMs) : reply()));
    }),
    name,
  );
const answering = answeringWith('answering', 204);
const failing5xx = answeringWith('failing5xx', 503, 'down');
const slow = answeringWith('slow', 204, undefined, SLOW_MS);
const pitSockets = new Set();
const tarpit = net.createServer((socket) => {
  counts.tarpit.connections++;
  pitSockets.add(socket);
  socket.on('data', () => undefined);
  socket.on('close', () => pitSockets.delete(socket));
});
const closed = net.createServer();
const refusing = await listen(closed);
await new Promise((resolve) => closed.close(resolve));

const ports = {
  healthy: await listen(healthy),
  answering: await listen(answering),
  failing5xx: await listen(failing5xx),
  slow: await listen(slow),
  tarpit: await listen(tarpit),
  refusing,
};
process.on('message', (m) => {
  if (m.ask === 'ports') process.send(ports);
  if (m.ask === 'secret') {
    verifier = new Webhook(m.secret);
    process.send(true);
  }
  if (m.ask === 'take') {
    process.send({ got, duplicates, forged });
    got = [];
    seen = new Set();
    duplicates = 0;
    forged = 0;
  }
  if (m.ask === 'counts') process.send(counts);
});
process.on('disconnect', () => process.exit(0));
process.send('ready');
