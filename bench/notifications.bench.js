// bench/notifications: signed notifications out, while the ingress is loaded, and what an endpoint that
// fails costs the ingress. One process, one database, one run:
//   (a) floor: a bare Fastify route that inserts one row through `pg` (bench/ingress-kit.js)
//   (e) factoryd ingress, `token` webhook, 1 run per delivery, no endpoint subscribed (the baseline of
//       (b)-(d)); measured first and again last, the baseline is their mean (the machine drifts)
//   (b) the same with one endpoint subscribed to every event, answering 204 on loopback: each delivery
//       makes two notifications (delivery.accepted, run.queued); then notifications out per second and
//       the latency from the state change (the event's timestamp, taken in its transaction) to its
//       receipt, p50 and p99, until everything is delivered
//   (c) the same with the endpoint on a closed port (every connection refused)
//   (d) the same with a tarpit endpoint: it accepts the connection and never answers
//       (NOTIFICATIONS_TIMEOUT_MS 2000 here, so attempts time out during the load)
// In the order e, c, d, e, b; each endpoint is disabled before the next case (its queue stays). Prints figures; never fails on a time.
import http from 'node:http';
import net from 'node:net';
import { loadavg } from 'node:os';
import { newUid } from '../dist/common/ids.js';
import { NotificationEndpoints } from '../dist/notifications/notification-endpoints.service.js';
import { Webhook } from 'standardwebhooks';
import {
  benchDatabase,
  benchService,
  CONNECTIONS,
  DURATION,
  fmt,
  load,
  measureFloor,
} from './ingress-kit.js';

const received = [];
let secret = '';
let forged = 0;
const receiver = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const at = Date.now();
    const raw = Buffer.concat(chunks).toString('utf8');
    try {
      new Webhook(secret).verify(raw, req.headers);
    } catch {
      forged++;
    }
    received.push({ at, event: Date.parse(JSON.parse(raw).timestamp) });
    res.writeHead(204).end();
  });
});
const listen = (server) =>
  new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server.address().port)));
const receiverPort = await listen(receiver);
// A port nothing listens on: bound once, then closed.
const closed = net.createServer();
const closedPort = await listen(closed);
await new Promise((resolve) => closed.close(resolve));
// Accepts, reads, never answers.
const tarpitSockets = new Set();
const tarpit = net.createServer((socket) => {
  tarpitSockets.add(socket);
  socket.on('data', () => undefined);
  socket.on('close', () => tarpitSockets.delete(socket));
});
const tarpitPort = await listen(tarpit);

const database = await benchDatabase();
const results = {};
const load1 = loadavg()[0];
try {
  results.a = await measureFloor(database.url);
  const { service, db, webhook, teamId } = await benchService(database.url, database.dir, {
    NOTIFICATIONS_ALLOW_PRIVATE_URLS: 'true',
    NOTIFICATIONS_TIMEOUT_MS: '2000',
  });
  const endpoints = service.app.get(NotificationEndpoints);
  const auth = { team: { id: teamId } };
  const tokenSecret = newUid() + newUid();
  const hook = await webhook('token', null, tokenSecret);
  const ingress = () =>
    load({ url: `${service.url}/webhooks/w/${hook}`, headers: { authorization: `Bearer ${tokenSecret}` } });
  /** Ingress load with an endpoint at `port` subscribed to everything; the endpoint is deleted after. */
  const withEndpoint = async (name, port, after) => {
    console.error(`bench/notifications: ${name}`);
    const created = await endpoints.create(auth, { name, url: `http://127.0.0.1:${port}/hook` });
    secret = created.secret;
    const [before] = await db.query(`SELECT count(*)::int AS n FROM notification_attempts`);
    const r = await ingress();
    const [counts] = await db.query(
      `SELECT (SELECT count(*)::int FROM notification_attempts) AS attempts,
              (SELECT count(*)::int FROM notification_messages WHERE endpoint_id = $1 AND status = 'pending') AS pending`,
      [created.endpoint.id],
    );
    r.attempts = counts.attempts - before.n;
    r.pending = counts.pending;
    await after?.(created);
    // Disabled, not deleted: no cascade of its messages runs into the next case.
    await endpoints.update(auth, created.endpoint.id, { enabled: false });
    return r;
  };

  // (e) brackets (c) and (d); (b) last, its drain would weigh on what follows it.
  results.e1 = await ingress();
  results.c = await withEndpoint('refusing', closedPort);
  results.d = await withEndpoint('tarpit', tarpitPort);
  results.e2 = await ingress();
  results.b = await withEndpoint('receiving', receiverPort, async (created) => {
    const loadEnded = Date.now();
    // Drained: every event fanned out and every message delivered (the figures cover them all).
    for (;;) {
      const [left] = await db.query(
        `SELECT (SELECT count(*)::int FROM notification_outbox) + (SELECT count(*)::int FROM notification_messages WHERE endpoint_id = $1 AND status = 'pending') AS n`,
        [created.endpoint.id],
      );
      if (left.n === 0) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    const [expected] = await db.query(
      `SELECT count(*)::int AS n FROM notification_messages WHERE endpoint_id = $1`,
      [created.endpoint.id],
    );
    results.expected = expected.n;
    results.drainMs = Date.now() - loadEnded;
  });
  await service.stop();
} catch (err) {
  console.error(err);
  process.exitCode = 1;
} finally {
  await database.drop();
  receiver.close();
  for (const s of tarpitSockets) s.destroy();
  tarpit.close();
}

const latencies = received.map((r) => r.at - r.event).sort((x, y) => x - y);
const pct = (p) => latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))] ?? 0;
const span = received.length > 1 ? (received.at(-1).at - received[0].at) / 1000 : 1;
const outPerSecond = received.length / span;
const floor = results.a.rps;
const baseline = (results.e1.rps + results.e2.rps) / 2;
const ratios = (r) => `   ${(r.rps / floor).toFixed(2)}× floor, ${(r.rps / baseline).toFixed(2)}× (e)`;
const tried = (r) =>
  `      ${r.attempts} attempts logged during the load, ${r.pending} messages pending at its end`;
console.log(
  `notifications benchmark: ${CONNECTIONS} connections, ${DURATION} s per case, loopback; load average at the start ${load1.toFixed(2)}, at the end ${loadavg()[0].toFixed(2)}`,
);
console.log(fmt('(a) floor: Fastify + one pg INSERT', results.a));
console.log(fmt('(e) ingress, 1 run, no endpoint (first)', results.e1) + ratios(results.e1));
console.log(fmt('(b) ingress, endpoint receiving', results.b) + ratios(results.b));
console.log(fmt('(c) ingress, endpoint refusing connections', results.c) + ratios(results.c));
console.log(tried(results.c));
console.log(fmt('(d) ingress, tarpit endpoint', results.d) + ratios(results.d));
console.log(tried(results.d));
console.log(fmt('(e) ingress, 1 run, no endpoint (last)', results.e2) + ratios(results.e2));
console.log(
  `(b) notifications out: ${received.length} received (${results.expected} messages), ${outPerSecond.toFixed(0)}/s; ` +
    `state change -> receipt p50 ${pct(50)} ms, p99 ${pct(99)} ms; drained ${results.drainMs} ms after the load; ${forged} failed verification`,
);
console.log(`ratio notifications out/s to the floor's req/s: ${(outPerSecond / floor).toFixed(2)}`);
console.log(
  `ratios to (e) (mean of first and last, ${baseline.toFixed(0)} req/s): (b) ${(results.b.rps / baseline).toFixed(2)}, (c) ${(results.c.rps / baseline).toFixed(2)}, (d) ${(results.d.rps / baseline).toFixed(2)}`,
);
