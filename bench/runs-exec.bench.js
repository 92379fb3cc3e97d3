// bench/runs-exec: 1,000 runs of a trivial harness through 4 service-hosted worker slots, against
// the baseline of spawning the same command 1,000 times, 4 at a time, with no service (run before and
// after, the ratio taken to their mean, as the load on a shared machine moves). The runs are
// queued first; the time runs from starting the 4 slots (a worker pool, as `factoryd worker` runs it)
// until the last run ended. Then the QUEUED→CLAIMED latency of runs created one at a time while the
// slots are idle (p50/p95). Uses DATABASE_URL when set, else a throwaway embedded PostgreSQL.
import { spawn } from 'node:child_process';
import pg_ from 'pg';
import { performance } from 'node:perf_hooks';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../dist/config/config.js';
import { EmbeddedPostgres } from '../dist/database/embedded-postgres.js';
import { RunsRepository } from '../dist/runs/runs.repository.js';
import { startService } from '../dist/service.js';
import { AuthRepository } from '../dist/auth/auth.repository.js';
import { AuthService } from '../dist/auth/auth.service.js';
import { bootstrapDefaultTeam } from '../dist/auth/bootstrap.js';
import { RunWakeups } from '../dist/workers/queue/run-wakeups.js';
import { harnessCatalog, startServiceHostedPool } from '../dist/workers/worker/service-workers.js';
import { WorkerRunsService } from '../dist/workers/queue/worker-runs.service.js';

const { Client } = pg_;
const RUNS = 1000;
const SLOTS = 4;
const LATENCY_SAMPLES = 200;
const HARNESS = `echo '{"type":"result","status":"succeeded","message":"ok"}'`;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const pct = (xs, p) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.ceil((p / 100) * xs.length) - 1)];

async function baseline() {
  const started = performance.now();
  let next = 0;
  const one = () =>
    new Promise((resolve) => {
      const child = spawn(HARNESS, { shell: true, detached: true, stdio: ['pipe', 'pipe', 'pipe'] });
      child.stdout.resume();
      child.stderr.resume();
      child.stdin.end();
      child.on('exit', resolve);
    });
  await Promise.all(
    Array.from({ length: SLOTS }, async () => {
      while (next++ < RUNS) await one();
    }),
  );
  return RUNS / ((performance.now() - started) / 1000);
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'factoryd-bench-'));
  chmodSync(dir, 0o755); // as root the embedded server runs as `postgres`, which must reach it
  let pg;
  let adminUrl = process.env.DATABASE_URL;
  if (!adminUrl) {
    pg = new EmbeddedPostgres({ dir: join(dir, 'pg'), durable: false });
    adminUrl = await pg.start();
  }
  try {
    await measure(adminUrl, dir);
  } finally {
    // Also when the measurement failed: no embedded server is left running.
    await pg?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The runs in a database of their own (even on DATABASE_URL: runs left from another run must not count as ended). */
async function measure(adminUrl, dir) {
  const dbName = `factoryd_bench_${process.pid}`;
  const admin = new Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${dbName}`);
  try {
    const dbUrl = new URL(adminUrl);
    dbUrl.pathname = `/${dbName}`;
    const url = dbUrl.toString();
    const config = loadConfig({
      DATABASE_URL: url,
      PORT: '0',
      LOG_LEVEL: 'silent',
      DATA_DIR: join(dir, 'data'),
      // The slots are started below, once the runs are queued.
      WORKER_CONCURRENCY: '0',
      HARNESS_COMMAND: HARNESS,
      // The harness sandbox as this shell sets it (unset: the strongest that works here).
      HARNESS_SANDBOX: process.env.HARNESS_SANDBOX ?? '',
      // The harnesses' way out (docs/security.md, "A harness's network"); `none`: no egress proxy, no forwarder.
      HARNESS_EGRESS_ALLOW: process.env.HARNESS_EGRESS_ALLOW ?? '',
    });
    const service = await startService(config);
    const authRepo = new AuthRepository(service.db);
    await bootstrapDefaultTeam(authRepo, new AuthService(authRepo));
    const team = await authRepo.findTeamByName('default');
    const runs = service.app.get(RunsRepository);
    const newRun = (i) => ({
      teamId: team.id,
      title: `bench ${i}`,
      prompt: `bench ${i}`,
      source: 'API',
      creatorId: null,
      agentConfig: {},
    });
    const ended = async () =>
      Number(
        (
          await service.db.query(
            `SELECT count(*) AS n FROM runs WHERE state IN ('SUCCEEDED','FAILED','ERROR')`,
          )
        )[0].n,
      );

    // The baseline runs before and after the service's turn, and the ratio is to their mean: on a
    // shared machine the load moves between the two.
    const baseBefore = await baseline();

    // Throughput: 1,000 queued runs; time from starting the slots until the last one ended.
    for (let i = 0; i < RUNS; i += 50)
      await Promise.all(
        Array.from({ length: Math.min(50, RUNS - i) }, (_, k) => runs.create(newRun(i + k), new Date())),
      );
    const harnesses = await harnessCatalog(config); // detected before the clock starts
    const t0 = performance.now();
    const pool = startServiceHostedPool(
      service.db,
      service.app.get(WorkerRunsService),
      service.app.get(RunWakeups),
      config,
      harnesses,
      (err) => console.error(err),
      { info: () => undefined, warn: (line) => console.error(line), error: (line) => console.error(line) },
      SLOTS,
    );
    while ((await ended()) < RUNS) await sleep(20);
    const rate = RUNS / ((performance.now() - t0) / 1000);
    const baseAfter = await baseline();
    const baseRate = (baseBefore + baseAfter) / 2;
    const failed = Number(
      (await service.db.query(`SELECT count(*) AS n FROM runs WHERE state <> 'SUCCEEDED'`))[0].n,
    );

    // Claim latency: one run at a time while the slots are idle.
    const ids = [];
    for (let i = 0; i < LATENCY_SAMPLES; i++) {
      ids.push(await runs.create(newRun(`latency ${i}`), new Date()));
      await sleep(15);
    }
    while ((await ended()) < RUNS + LATENCY_SAMPLES) await sleep(20);
    const rows = await service.db.query(
      `SELECT extract(epoch FROM claimed_at - created_at) * 1000 AS ms FROM runs WHERE id = ANY($1::uuid[])`,
      [ids],
    );
    const lat = rows.map((r) => Number(r.ms));

    console.log(
      `runs:        ${RUNS} runs through ${SLOTS} slots: ${rate.toFixed(1)} runs/s (${failed} not SUCCEEDED)`,
    );
    console.log(
      `baseline:    spawning the same command ${RUNS}x, ${SLOTS} at a time: ${baseRate.toFixed(1)} runs/s (${baseBefore.toFixed(1)} before, ${baseAfter.toFixed(1)} after)`,
    );
    console.log(`ratio:       ${(rate / baseRate).toFixed(2)} of baseline (target >= 0.8)`);
    console.log(
      `claim:       QUEUED->CLAIMED p50 ${pct(lat, 50).toFixed(1)} ms, p95 ${pct(lat, 95).toFixed(1)} ms over ${lat.length} runs (target p95 <= 20 ms)`,
    );
    await pool.stop();
    await service.stop();
  } finally {
    await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`).catch(() => undefined);
    await admin.end();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
