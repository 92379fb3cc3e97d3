// bench/ingress-faults: the ingress under database faults. The ingress bench's token webhook (20
// automations, 1 run per delivery, unique bodies) loaded while every 1.5–3 s a separate admin
// connection terminates all of the service's backends (pg_terminate_backend), as a failover or an
// administrator would. Prints accepted/s, the answers by status, and checks that every 202's
// delivery is stored (missing must be 0), against the floor (bench/ingress (a)) and the same ingress
// without faults, both measured in this run. Never fails on a time.
import { newUid } from '../dist/common/ids.js';
import {
  benchDatabase,
  benchService,
  CONNECTIONS,
  DURATION,
  fmt,
  load,
  measureFloor,
} from './ingress-kit.js';

const database = await benchDatabase();
const results = {};
let cuts = 0;
let killed = 0;
try {
  results.floor = await measureFloor(database.url);
  const { service, db, webhook } = await benchService(database.url, database.dir);
  const secret = newUid() + newUid();
  const target = {
    url: `${service.url}/webhooks/w/${await webhook('token', null, secret)}`,
    headers: { authorization: `Bearer ${secret}` },
  };
  results.plain = await load(target);

  let cutting = true;
  const cutter = (async () => {
    while (cutting) {
      await new Promise((r) => setTimeout(r, 1500 + Math.random() * 1500));
      if (!cutting) break;
      const { rows } = await database.admin.query(
        `SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
          WHERE datname = $1 AND application_name = 'factoryd'`,
        [database.name],
      );
      cuts++;
      killed += rows[0].n;
    }
  })();
  // Warmed by the plain run already; the cuts begin with the measured load.
  results.faults = await load({ ...target, collect: true, warmup: 0 });
  cutting = false;
  await cutter;

  // Every 202 names its delivery: each must be stored as accepted.
  const accepted = results.faults.accepted;
  const [check] = await db.query(
    `SELECT count(*)::int AS stored FROM deliveries d
      WHERE d.status = 'accepted' AND d.identity = ANY($1::text[])`,
    [accepted],
  );
  results.stored = check.stored;
  await service.stop();
} catch (err) {
  console.error(err);
  process.exitCode = 1;
} finally {
  await database.drop();
}

const f = results.faults;
const acceptedPerSecond = f.accepted.length / f.seconds;
console.log(`ingress under faults: ${CONNECTIONS} connections, ${DURATION} s each, loopback`);
console.log(fmt('floor: Fastify + one pg INSERT', results.floor));
console.log(fmt('ingress, no faults', results.plain));
console.log(fmt('ingress, backends terminated every 1.5-3 s', f));
console.log(`terminations: ${cuts} rounds, ${killed} backends`);
console.log(
  `answers by status: ${Object.entries(f.statuses)
    .map(([s, n]) => `${s}: ${n}`)
    .join(', ')}; connection errors ${f.errors}, timeouts ${f.timeouts}`,
);
console.log(`503 without Retry-After: ${f.unavailableWithoutRetryAfter}`);
console.log(`accepted/s under faults: ${acceptedPerSecond.toFixed(0)}`);
console.log(
  `202s: ${f.accepted.length}, stored: ${results.stored}, missing: ${f.accepted.length - results.stored}   (must be 0)`,
);
console.log(`ratio accepted/s under faults / floor: ${(acceptedPerSecond / results.floor.rps).toFixed(2)}`);
console.log(
  `ratio accepted/s under faults / ingress without faults: ${(acceptedPerSecond / results.plain.rps).toFixed(2)}`,
);
