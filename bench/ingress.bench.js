// bench/ingress: webhook ingress throughput and latency on loopback, against its floor.
//   (a) floor: a bare Fastify route that inserts one row through `pg` (same PostgreSQL, same pool size)
//   (b) factoryd ingress, `token` webhook, unique bodies (dedupe on sha256), 20 automations, 1 run per delivery
//   (c) the same with a `github` signature (HMAC per request)
// The load generator runs in a child process so it does not share the servers' event loop.
// Rate limit raised for the run with WEBHOOK_RATE_LIMIT_PER_MINUTE; no service-hosted workers
// (WORKER_CONCURRENCY=0), so the runs the deliveries start stay queued instead of spawning agent
// processes on the same cores. Prints figures; never fails on a time.
import { fork } from 'node:child_process';
import { createHmac, randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const DURATION = Number(process.env.BENCH_SECONDS ?? 10);

if (process.argv[2] === 'load') {
  // Child: drive one target with autocannon and print its figures as JSON.
  const { default: autocannon } = await import('autocannon');
  const spec = JSON.parse(process.env.BENCH_TARGET);
  let n = 0;
  const result = await autocannon({
    url: spec.url,
    connections: CONNECTIONS,
    duration: DURATION,
    method: 'POST',
    requests: [
      {
        setupRequest: (req) => {
          const body = JSON.stringify({ kind: 'k0', n: n++, nonce: Math.random(), action: 'opened' });
          const headers = { ...spec.headers, 'content-type': 'application/json' };
          if (spec.githubSecret) {
            headers['x-hub-signature-256'] =
              `sha256=${createHmac('sha256', spec.githubSecret).update(body).digest('hex')}`;
          }
          return { ...req, method: 'POST', headers, body };
        },
      },
    ],
  });
  const non2xx = result.non2xx + result.errors + result.timeouts;
  process.stdout.write(
    JSON.stringify({
      rps: result.requests.average,
      p50: result.latency.p50,
      p99: result.latency.p99,
      total: result.requests.total,
      non2xx,
    }),
  );
  process.exit(0);
}

const { default: Fastify } = await import('fastify');
const { default: pg } = await import('pg');
const { EmbeddedPostgres } = await import('../dist/database/embedded-postgres.js');
const { loadConfig } = await import('../dist/config/config.js');
const { startService } = await import('../dist/service.js');
const { SecretsService } = await import('../dist/secrets/secrets.service.js');
const { newUid } = await import('../dist/common/ids.js');

function load(target) {
  return new Promise((resolve, reject) => {
    const child = fork(new URL(import.meta.url).pathname, ['load'], {
      env: { ...process.env, BENCH_TARGET: JSON.stringify(target) },
      stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
    });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.on('exit', (code) =>
      code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`load generator exited ${code}`)),
    );
  });
}

const dir = mkdtempSync(join(tmpdir(), 'factoryd-bench-'));
chmodSync(dir, 0o755); // as root the embedded server runs as `postgres`, which must reach it
let embedded;
let adminUrl = process.env.DATABASE_URL;
if (!adminUrl) {
  embedded = new EmbeddedPostgres({ dir: join(dir, 'pg'), durable: true });
  adminUrl = await embedded.start();
}
const dbName = `factoryd_bench_${randomBytes(4).toString('hex')}`;
const admin = new pg.Client({ connectionString: adminUrl });
await admin.connect();
await admin.query(`CREATE DATABASE ${dbName}`);
const url = new URL(adminUrl);
url.pathname = `/${dbName}`;
const databaseUrl = url.toString();

const results = {};
try {
  // (a) the floor
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 20 });
  await pool.query(
    `CREATE TABLE bench_floor (id bigserial PRIMARY KEY, body jsonb NOT NULL, received_at timestamptz NOT NULL DEFAULT now())`,
  );
  const floor = Fastify();
  floor.post('/floor', async (req, reply) => {
    await pool.query(`INSERT INTO bench_floor (body) VALUES ($1)`, [JSON.stringify(req.body)]);
    return reply.code(202).send({ ok: true });
  });
  await floor.listen({ port: 0, host: '127.0.0.1' });
  results.a = await load({ url: `http://127.0.0.1:${floor.server.address().port}/floor`, headers: {} });
  await floor.close();
  await pool.end();

  // (b) and (c): factoryd
  const config = loadConfig({
    DATABASE_URL: databaseUrl,
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'silent',
    DATA_DIR: join(dir, 'data'),
    WEBHOOK_RATE_LIMIT_PER_MINUTE: '1000000',
    WORKER_CONCURRENCY: '0',
  });
  const service = await startService(config);
  const db = service.db;
  const [team] = await db.query(`INSERT INTO teams (uid, name) VALUES ($1, 'bench') RETURNING id`, [
    newUid(),
  ]);
  const [factory] = await db.query(
    `INSERT INTO factories (uid, team_id, name, repo_url, definition, ready) VALUES ($1, $2, 'bench', 'file:///dev/null', $3, true) RETURNING id`,
    [
      newUid(),
      team.id,
      { schemaVersion: 'v1alpha1', name: 'bench', agentDefaults: { model: 'bench-model' } },
    ],
  );
  await db.execute(
    `INSERT INTO agents (factory_id, name, path, agent_type, base_prompt) VALUES ($1, 'foreman', 'agents/foreman/agent.md', 'FOREMAN', 'You lead.')`,
    [factory.id],
  );
  const secrets = service.app.get(SecretsService);
  const webhook = async (authMode, scheme, secret) => {
    const name = `hook-${newUid().slice(0, 6)}`;
    const ref = await secrets.set(team.id, name, secret);
    const uid = newUid();
    await db.execute(
      `INSERT INTO webhooks (uid, factory_id, team_id, name, path, auth_mode, signature_scheme, secret_name, secret_version_id)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $4, $8)`,
      [uid, factory.id, team.id, name, `webhooks/${name}.yaml`, authMode, scheme, ref.versionId],
    );
    // 20 automations select this webhook; the payload filter lets exactly one of them fire.
    for (let i = 0; i < 20; i++) {
      const triggers = [
        {
          provider: 'webhook',
          event: 'received',
          filter: { webhook_ids: [uid], payload: { kind: [`k${i}`], action: { not_in: ['deleted'] } } },
        },
      ];
      await db.execute(
        `INSERT INTO automations (factory_id, name, path, triggers, prompt) VALUES ($1, $2, $3, $4, 'Handle it.')`,
        [factory.id, `${name}-a${i}`, `automations/${name}-a${i}/automation.md`, JSON.stringify(triggers)],
      );
    }
    return uid;
  };
  const tokenSecret = newUid() + newUid();
  const tokenHook = await webhook('token', null, tokenSecret);
  const githubHook = await webhook('signature', 'github', 'gh-bench-secret');

  results.b = await load({
    url: `${service.url}/webhooks/w/${tokenHook}`,
    headers: { authorization: `Bearer ${tokenSecret}` },
  });
  results.c = await load({
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
  await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`).catch(() => undefined);
  await admin.end();
  await embedded?.stop();
  rmSync(dir, { recursive: true, force: true });
}

const fmt = (label, r) =>
  `${label.padEnd(44)} ${r.rps.toFixed(0).padStart(7)} req/s   p50 ${String(r.p50).padStart(3)} ms   p99 ${String(r.p99).padStart(3)} ms   (${r.total} requests, ${r.non2xx} not 2xx)`;
console.log(`ingress benchmark: ${CONNECTIONS} connections, ${DURATION} s each, loopback`);
console.log(fmt('(a) floor: Fastify + one pg INSERT', results.a));
console.log(fmt('(b) ingress, token, 20 automations, 1 run', results.b));
console.log(fmt('(c) ingress, github signature, 1 run', results.c));
console.log(`ratio (b)/(a) throughput: ${(results.b.rps / results.a.rps).toFixed(2)}   (target >= 0.60)`);
console.log(`ratio (c)/(a) throughput: ${(results.c.rps / results.a.rps).toFixed(2)}`);
console.log(`p99 (b): ${results.b.p99} ms   (target <= 50 ms)`);
console.log(`check: ${results.check.accepted} accepted deliveries, ${results.check.runs} runs started`);
