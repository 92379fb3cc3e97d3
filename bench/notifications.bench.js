// bench/notifications: signed notifications out, to a receiver on loopback, while the ingress is loaded.
//   (a) floor: a bare Fastify route that inserts one row through `pg` (bench/ingress-kit.js)
//   (b) factoryd ingress, `token` webhook, 1 run per delivery, with one endpoint subscribed to every
//       event: each delivery makes two notifications (delivery.accepted, run.queued)
//   then: notifications received per second, and the latency from the state change (the event's
//   timestamp, taken in its transaction) to its receipt, p50 and p99, until the outbox is drained.
// Prints figures; never fails on a time.
import http from 'node:http';
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
await new Promise((resolve) => receiver.listen(0, '127.0.0.1', resolve));

const database = await benchDatabase();
const results = {};
try {
  results.a = await measureFloor(database.url);
  const { service, db, webhook, teamId } = await benchService(database.url, database.dir, {
    NOTIFICATIONS_ALLOW_PRIVATE_URLS: 'true',
  });
  const created = await service.app
    .get(NotificationEndpoints)
    .create(
      { team: { id: teamId } },
      { name: 'bench', url: `http://127.0.0.1:${receiver.address().port}/hook` },
    );
  secret = created.secret;
  const tokenSecret = newUid() + newUid();
  const hook = await webhook('token', null, tokenSecret);
  results.b = await load({
    url: `${service.url}/webhooks/w/${hook}`,
    headers: { authorization: `Bearer ${tokenSecret}` },
  });
  const loadEnded = Date.now();
  // Drained: every event fanned out and every message delivered (the figures cover them all).
  for (;;) {
    const [left] = await db.query(
      `SELECT (SELECT count(*)::int FROM notification_outbox) + (SELECT count(*)::int FROM notification_messages WHERE status = 'pending') AS n`,
    );
    if (left.n === 0) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  const [expected] = await db.query(`SELECT count(*)::int AS n FROM notification_messages`);
  results.expected = expected.n;
  results.drainMs = Date.now() - loadEnded;
  await service.stop();
} catch (err) {
  console.error(err);
  process.exitCode = 1;
} finally {
  await database.drop();
  receiver.close();
}

const latencies = received.map((r) => r.at - r.event).sort((x, y) => x - y);
const pct = (p) => latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))] ?? 0;
const span = received.length > 1 ? (received.at(-1).at - received[0].at) / 1000 : 1;
const outPerSecond = received.length / span;
console.log(`notifications benchmark: ${CONNECTIONS} connections, ${DURATION} s of ingress load, loopback`);
console.log(fmt('(a) floor: Fastify + one pg INSERT', results.a));
console.log(fmt('(b) ingress, 1 run, 1 endpoint subscribed', results.b));
console.log(
  `notifications out: ${received.length} received (${results.expected} messages), ${outPerSecond.toFixed(0)}/s; ` +
    `state change -> receipt p50 ${pct(50)} ms, p99 ${pct(99)} ms; drained ${results.drainMs} ms after the load; ${forged} failed verification`,
);
console.log(`ratio notifications out/s to the floor's req/s: ${(outPerSecond / results.a.rps).toFixed(2)}`);
console.log(
  `ratio (b)/(a) ingress throughput with notifications on: ${(results.b.rps / results.a.rps).toFixed(2)}`,
);
