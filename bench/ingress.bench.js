// bench/ingress: webhook ingress throughput and latency on loopback, against its floor.
//   (a) floor: a bare Fastify route that inserts one row through `pg` (same PostgreSQL, same pool size)
//   (b) factoryd ingress, `token` webhook, unique bodies (dedupe on sha256), 20 automations, 1 run per delivery
//   (c) the same with a `github` signature (HMAC per request)
// The load generator runs in a child process so it does not share the servers' event loop.
// Prints figures; never fails on a time.
import { newUid } from '../dist/common/ids.js';
import {
  benchDatabase,
  benchService,
  CONNECTIONS,
  cpuMeter,
  DURATION,
  fmt,
  load,
  measureFloor,
  WARMUP,
} from './ingress-kit.js';

const database = await benchDatabase();
const results = {};
try {
  results.a = await measureFloor(database.url);
  const { service, db, webhook } = await benchService(database.url, database.dir);
  const tokenSecret = newUid() + newUid();
  const tokenHook = await webhook('token', null, tokenSecret);
  const githubHook = await webhook('signature', 'github', 'gh-bench-secret');

  const measured = async (target) => {
    const cpu = cpuMeter((sql) => db.query(sql));
    await cpu.start();
    const r = await load(target);
    return { ...r, cpu: await cpu.stop(r.total + r.warmupTotal) };
  };
  results.b = await measured({
    url: `${service.url}/webhooks/w/${tokenHook}`,
    headers: { authorization: `Bearer ${tokenSecret}` },
  });
  results.c = await measured({
    url: `${service.url}/webhooks/w/${githubHook}`,
    headers: {},
    githubSecret: 'gh-bench-secret',
  });
  // One statement, one snapshot: requests still in flight when the load stops may commit meanwhile.
  const [check] = await db.query(
    `SELECT (SELECT count(*)::int FROM runs) AS runs,
            (SELECT count(*)::int FROM deliveries WHERE status = 'accepted') AS accepted`,
  );
  results.check = check;
  await service.stop();
} catch (err) {
  console.error(err);
  process.exitCode = 1;
} finally {
  await database.drop();
}

console.log(
  `ingress benchmark: ${CONNECTIONS} connections, ${DURATION} s each after ${WARMUP} s of warm-up, loopback`,
);
console.log(fmt('(a) floor: Fastify + one pg INSERT', results.a));
console.log(fmt('(b) ingress, token, 20 automations, 1 run', results.b));
console.log(fmt('(c) ingress, github signature, 1 run', results.c));
console.log(`ratio (b)/(a) throughput: ${(results.b.rps / results.a.rps).toFixed(2)}   (target >= 0.75)`);
const cpu = (r) => r.cpu.nodeUs + r.cpu.pgUs;
console.log(
  `CPU per request (b)/(a): ${(cpu(results.b) / cpu(results.a)).toFixed(2)}× ` +
    `(a load generator on the same cores takes the rest; throughput cannot pass about its inverse)`,
);
console.log(`ratio (c)/(a) throughput: ${(results.c.rps / results.a.rps).toFixed(2)}`);
console.log(`p99 (b): ${results.b.p99} ms   (target <= 50 ms)`);
console.log(`check: ${results.check.accepted} accepted deliveries, ${results.check.runs} runs started`);
