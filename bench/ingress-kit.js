// The pieces the ingress benchmarks share: a throwaway database, the floor, a service with webhooks
// set up as the reconciler would leave them, the load generator, and how a line of figures reads.
import { fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Fastify from 'fastify';
import pg from 'pg';
import { newUid } from '../dist/common/ids.js';
import { loadConfig } from '../dist/config/config.js';
import { EmbeddedPostgres } from '../dist/database/embedded-postgres.js';
import { SecretsService } from '../dist/secrets/secrets.service.js';
import { startService } from '../dist/service.js';

export const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
export const DURATION = Number(process.env.BENCH_SECONDS ?? 10);
/** Seconds of the same load before each measured run (not counted): JIT, caches and pools warm for every target alike. */
export const WARMUP = Number(process.env.BENCH_WARMUP_SECONDS ?? 2);

/**
 * Drives one target with autocannon in a child process (bench/ingress-load.js) for DURATION seconds;
 * resolves with its figures. `collect`: also each 202's delivery id; `rate`: at most that many
 * requests a second in all (else as fast as the connections go); `connections`, `seconds`, `warmup`:
 * other than the defaults. `onMeasuring`: called when the warm-up is over and the measured run starts.
 */
export function load(target, { onMeasuring } = {}) {
  return new Promise((resolve, reject) => {
    const child = fork(new URL('./ingress-load.js', import.meta.url).pathname, [], {
      env: {
        ...process.env,
        BENCH_TARGET: JSON.stringify({
          connections: CONNECTIONS,
          seconds: DURATION,
          warmup: WARMUP,
          ...target,
        }),
      },
      stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
    });
    let out = '';
    child.on('message', (m) => (m === 'measuring' ? onMeasuring?.() : undefined));
    child.stdout.on('data', (d) => (out += d));
    child.on('exit', (code) =>
      code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`load generator exited ${code}`)),
    );
  });
}

/**
 * A fresh database on DATABASE_URL's server, or on an embedded one under a temporary folder (durable,
 * like a real start, unless `durable: false`: for benchmarks that time no commit); `drop` removes both.
 */
export async function benchDatabase({ durable = true } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'factoryd-bench-'));
  chmodSync(dir, 0o755); // as root the embedded server runs as `postgres`, which must reach it
  let embedded;
  let adminUrl = process.env.DATABASE_URL;
  if (!adminUrl) {
    embedded = new EmbeddedPostgres({ dir: join(dir, 'pg'), durable });
    adminUrl = await embedded.start();
  }
  const name = `factoryd_bench_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  admin.on('error', () => undefined);
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    name,
    dir,
    admin,
    async drop() {
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => undefined);
      await admin.end();
      await embedded?.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * CPU spent serving a load: this process's (the server under test runs in it) and that of the
 * database's backends, read from /proc (a server on this machine, as in every benchmark here), per
 * request. `query` runs SQL on the database under test. Where the throughput ratio comes from: a
 * target that spends k× the floor's CPU per request cannot pass 1/k of its throughput on the same cores.
 */
export function cpuMeter(query) {
  const ticks = (pid) => {
    try {
      const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
      return Number(fields[11]) + Number(fields[12]); // utime + stime, in clock ticks (1/100 s)
    } catch {
      return 0; // not on this machine, or gone
    }
  };
  const backends = async () => {
    const rows = await query(`SELECT pid FROM pg_stat_activity WHERE datname = current_database()`);
    return new Map(rows.map((r) => [r.pid, ticks(r.pid)]));
  };
  let before;
  return {
    async start() {
      before = { node: process.cpuUsage(), pg: await backends() };
    },
    /** Microseconds of CPU per request (`requests` served since start, warm-up included): this process's and PostgreSQL's. */
    async stop(requests) {
      const node = process.cpuUsage(before.node);
      let pgTicks = 0;
      for (const [pid, t] of await backends()) pgTicks += t - (before.pg.get(pid) ?? 0);
      return {
        nodeUs: Math.round((node.user + node.system) / requests),
        pgUs: Math.round((pgTicks * 10_000) / requests),
      };
    },
  };
}

/** The floor: a bare Fastify route that inserts one row through `pg` (same PostgreSQL, same pool size). */
export async function measureFloor(databaseUrl) {
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
  try {
    const cpu = cpuMeter(async (sql) => (await pool.query(sql)).rows);
    await cpu.start();
    const r = await load({ url: `http://127.0.0.1:${floor.server.address().port}/floor`, headers: {} });
    return { ...r, cpu: await cpu.stop(r.total + r.warmupTotal) };
  } finally {
    await floor.close();
    await pool.end();
  }
}

/**
 * factoryd on `databaseUrl` (rate limit raised, no service-hosted workers, so the runs the deliveries
 * start stay queued instead of spawning agent processes on the same cores) with a factory whose
 * webhooks each have 20 automations, of which the payload lets exactly one fire. `env`: more settings;
 * `config`: settings no variable sets (e.g. `notificationsDispatcher`). `team(name)` makes another
 * team with a factory of its own, and its `webhook` maker.
 */
export async function benchService(databaseUrl, dir, env = {}, config = {}) {
  const loaded = loadConfig({
    ...env,
    DATABASE_URL: databaseUrl,
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'silent',
    DATA_DIR: join(dir, 'data'),
    WEBHOOK_RATE_LIMIT_PER_MINUTE: '1000000',
    WORKER_CONCURRENCY: '0',
  });
  const service = await startService({ ...loaded, ...config });
  const db = service.db;
  const secrets = service.app.get(SecretsService);
  const team = async (teamName) => {
    const [row] = await db.query(`INSERT INTO teams (uid, name) VALUES ($1, $2) RETURNING id`, [
      newUid(),
      teamName,
    ]);
    const [factory] = await db.query(
      `INSERT INTO factories (uid, team_id, name, repo_url, definition, ready) VALUES ($1, $2, 'bench', 'file:///dev/null', $3, true) RETURNING id`,
      [
        newUid(),
        row.id,
        { schemaVersion: 'v1alpha1', name: 'bench', agentDefaults: { model: 'bench-model' } },
      ],
    );
    await db.execute(
      `INSERT INTO agents (factory_id, name, path, agent_type, base_prompt) VALUES ($1, 'foreman', 'agents/foreman/agent.md', 'FOREMAN', 'You lead.')`,
      [factory.id],
    );
    /** A webhook and its 20 automations; returns its UID. */
    const webhook = async (authMode, scheme, secret) => {
      const name = `hook-${newUid().slice(0, 6)}`;
      const ref = await secrets.set(row.id, name, secret);
      const uid = newUid();
      await db.execute(
        `INSERT INTO webhooks (uid, factory_id, team_id, name, path, auth_mode, signature_scheme, secret_name, secret_version_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $4, $8)`,
        [uid, factory.id, row.id, name, `webhooks/${name}.yaml`, authMode, scheme, ref.versionId],
      );
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
    return { teamId: row.id, webhook };
  };
  const first = await team('bench');
  return { service, db, config: loaded, webhook: first.webhook, teamId: first.teamId, team };
}

/** One line of figures (with the CPU per request where it was measured). */
export const fmt = (label, r) =>
  `${label.padEnd(44)} ${r.rps.toFixed(0).padStart(7)} req/s   p50 ${String(r.p50).padStart(3)} ms   p99 ${String(r.p99).padStart(3)} ms   (${r.total} requests, ${r.non2xx} not 2xx)` +
  (r.cpu ? `   CPU/request: server ${r.cpu.nodeUs} µs, PostgreSQL ${r.cpu.pgUs} µs` : '');
