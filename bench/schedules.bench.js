// A schedule storm: 10,000 schedules due in the same minute, fired by two scheduler instances (two
// services on one database, as two replicas) racing for them. Prints how long until every schedule
// has fired, how many runs each replica started and how many firings were doubled (target: all
// within 10 s, zero duplicates); the baseline, measured in the same run, is the same number of runs
// inserted in one statement through the runs repository (what a firing adds to that is the claim);
// and the ratio.
//
//   npm run build && node bench/schedules.bench.js          (embedded PostgreSQL in a temp folder)
//   DATABASE_URL=postgres://… node bench/schedules.bench.js  (a fresh database on that server)
//   SCHEDULES=2000 node bench/schedules.bench.js             (smaller, quicker)
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { AuthRepository } from '../dist/auth/auth.repository.js';
import { AuthService } from '../dist/auth/auth.service.js';
import { bootstrapDefaultTeam } from '../dist/auth/bootstrap.js';
import { Clock } from '../dist/common/clock.js';
import { loadConfig } from '../dist/config/config.js';
import { StatementParams } from '../dist/database/multi-row.js';
import { RunsRepository } from '../dist/runs/runs.repository.js';
import { ScheduleFiring } from '../dist/schedules/schedule-firing.js';
import { startService } from '../dist/service.js';
import { benchDatabase } from './ingress-kit.js';

const SCHEDULES = Number(process.env.SCHEDULES ?? 10_000);
// The minute they are all due in; far from the real clock, so nothing fires before the storm.
const BEFORE = new Date('2031-01-01T08:59:00Z');
const DUE = new Date('2031-01-01T09:00:00Z');
const NEXT = new Date('2031-01-02T09:00:00Z');

const log = (line) => process.stdout.write(`${line}\n`);

// ---- database and two replicas ----------------------------------------------------------------
const database = await benchDatabase({ durable: false });
const config = (n) =>
  loadConfig({
    PORT: '0',
    LOG_LEVEL: 'error',
    DATA_DIR: join(database.dir, `data-${n}`),
    DATABASE_URL: database.url,
    WORKER_CONCURRENCY: '0',
  });
const replicas = [await startService(config(1)), await startService(config(2))];
// Each replica's own scheduler runs on, by its clock, which stays before the storm: the storm is
// fired by the explicit passes below, so that each replica's share can be counted.
for (const r of replicas) r.app.get(Clock).now = () => BEFORE;
const sql = new pg.Client({ connectionString: database.url });
await sql.connect();

try {
  const authRepo = new AuthRepository(replicas[0].db);
  const auth = new AuthService(authRepo);
  await bootstrapDefaultTeam(authRepo, auth);
  const team = await authRepo.findTeamByName('default');
  const baselineTeam = await auth.createTeam('baseline');

  log(`seeding ${SCHEDULES.toLocaleString('en')} schedules due at ${DUE.toISOString()}…`);
  await sql.query(
    `INSERT INTO schedules (team_id, name, cron_schedule, prompt, agent_config, next_fire_at)
     SELECT $1, 'storm ' || i, '0 9 * * *', 'Nightly storm ' || i, '{"name": "storm"}', $2
       FROM generate_series(1, $3) AS i`,
    [team.id, DUE, SCHEDULES],
  );
  await sql.query(`ANALYZE schedules`);

  // ---- baseline: the same number of runs, one statement -------------------------------------
  const runs = replicas[0].app.get(RunsRepository);
  const newRuns = Array.from({ length: SCHEDULES }, (_, i) => ({
    teamId: baselineTeam.id,
    title: `storm ${i}`,
    prompt: `Nightly storm ${i}`,
    source: 'SCHEDULED_AGENT',
    creatorId: null,
    agentConfig: { name: 'storm' },
    metadata: { schedule_id: `baseline-${i}` },
  }));
  const b0 = performance.now();
  const params = new StatementParams();
  const part = runs.insertManyPart(params, newRuns, DUE);
  await replicas[0].db.execute(`WITH ${part.ctes} SELECT 1`, params.values);
  const baselineMs = performance.now() - b0;

  // ---- the storm: both replicas fire at once ------------------------------------------------
  const s0 = performance.now();
  const started = await Promise.all(replicas.map((r) => r.app.get(ScheduleFiring).fireDue(DUE)));
  const stormMs = performance.now() - s0;

  const [check] = (
    await sql.query(
      `SELECT count(*)::int AS runs, count(DISTINCT metadata->>'schedule_id')::int AS fired
         FROM runs WHERE team_id = $1 AND source = 'SCHEDULED_AGENT'`,
      [team.id],
    )
  ).rows;
  const [moved] = (
    await sql.query(`SELECT count(*)::int AS n FROM schedules WHERE next_fire_at = $1`, [NEXT])
  ).rows;
  const duplicates = check.runs - check.fired;

  log(
    `storm: ${check.fired.toLocaleString('en')} of ${SCHEDULES.toLocaleString('en')} schedules fired in ${(stormMs / 1000).toFixed(2)} s`,
  );
  log(
    `  replica 1 started ${started[0]}, replica 2 started ${started[1]}; ${moved.n} moved on to ${NEXT.toISOString()}`,
  );
  log(
    `  duplicates: ${duplicates} (target 0); within 10 s: ${stormMs <= 10_000 && check.fired === SCHEDULES ? 'yes' : 'NO'}`,
  );
  log(
    `baseline: ${SCHEDULES.toLocaleString('en')} runs inserted in one statement in ${(baselineMs / 1000).toFixed(2)} s`,
  );
  log(`ratio storm/baseline: ${(stormMs / baselineMs).toFixed(2)}×`);
} finally {
  await sql.end();
  for (const r of replicas) await r.stop();
  await database.drop();
}
