// GET /api/v1/agent/runs over 1,000,000 runs of one team (plus a fifth as many of another team), timed
// over HTTP and, as the baseline in the same run, the very SQL statement the service sends, sent the way
// the service sends it (an unfiltered page as a named statement, prepared once per connection; a
// filtered one unnamed, planned for its values each time: src/database/database.ts, QueryOptions),
// straight through `pg`. Prints p50/p95 for both and the HTTP/SQL ratio per case, and the same statement
// unprepared for reference. Targets: p95 ≤ 15 ms, HTTP ≤ 2× SQL.
//
//   npm run build && node bench/runs-list.bench.js       (embedded PostgreSQL in a temp folder)
//   DATABASE_URL=postgres://… node bench/runs-list.bench.js   (a fresh database on that server)
//   RUNS_LIST_SIZES=1000000,10000000 node bench/runs-list.bench.js   (each size in turn, grown in place)
//   RUNS_LIST_SIZES=200000 REQUESTS=100 node bench/runs-list.bench.js   (smaller, quicker)
//   WARMUP=500 …   (more warm-up requests per case than the 30 by default; 500 changed nothing on 2026-11-25)
//   RUNS_LIST_KEEP=1 DATABASE_URL=postgres://…/runs_list_10m RUNS_LIST_SIZES=10000000 node bench/runs-list.bench.js
//     (the database DATABASE_URL names is created if missing and kept: a later run finds the runs
//     already there and measures at once; a smaller table is grown, a larger one emptied and re-seeded)
//
// Seeding is one INSERT … SELECT generate_series per team in one transaction, with only the primary
// key present (the other indexes are dropped first and built after, with maintenance_work_mem raised)
// and with triggers and foreign-key checks off (session_replication_role = replica: the rows are
// consistent by construction, and the insert triggers would write a run transition and look for a
// notification endpoint per row). On 2 shared cores (load average 3-7) 1M seeded in 62 s (17 loading,
// 44 indexing) and 10M in 18 min (4.3 loading, 14 indexing, over 6 of them the trigram GIN index of `q`):
// seed 10M once with RUNS_LIST_KEEP=1 and measure as often as needed.
//
// After the cases, a second table splits each case's HTTP p50 (differences of p50s): the client's side
// of HTTP and the loopback (HTTP minus the service's time from its `request` event to the response's
// `finish`), the service's own work (that time minus its statements, timed around `Database.query` and
// `queryWithin`),
// and its statement. On 2026-11-25 at 1M: 0.25-0.33 ms, 0.33-0.42 ms and 0.48-1.02 ms: the first two
// together are more than the statement, so HTTP ≤ 2× SQL is met only where the statement is slow.
//
// Where the HTTP time goes beyond the SQL (node --cpu-prof of the service at 1M, 20 runs a page): the
// request and its answer through Fastify and Nest, and the API key (served from the verified-key
// cache, src/auth/verified-keys.ts, after hashing the presented key) — about 0.1 ms together, the
// `/healthz` and `<unknown id>` reference lines below — then per run about 8 µs: 3 parsing the row
// (pg, its timestamps and jsonb: in the baseline too), 2.5 presenting it, 2.5 in JSON. Unprepared, the
// statement costs PostgreSQL its planning every time (0.25-0.35 ms of the 0.4-0.7 ms it takes at 1M):
// the `unprep` columns, which an earlier version of this benchmark took for its baseline.

import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { hashApiKey } from '../dist/auth/api-key.js';
import { AuthRepository } from '../dist/auth/auth.repository.js';
import { AuthService } from '../dist/auth/auth.service.js';
import { bootstrapDefaultTeam } from '../dist/auth/bootstrap.js';
import { loadConfig } from '../dist/config/config.js';
import { EmbeddedPostgres } from '../dist/database/embedded-postgres.js';
import { QueryParams } from '../dist/common/query-params.js';
import { buildRunListSql, parseRunListQuery } from '../dist/runs/run-list.js';
import { startService } from '../dist/service.js';

const SIZES = (process.env.RUNS_LIST_SIZES ?? process.env.RUNS ?? '1000000')
  .split(',')
  .map(Number)
  .sort((a, b) => a - b);
if (!SIZES.every((n) => Number.isSafeInteger(n) && n > 0))
  throw new Error(`RUNS_LIST_SIZES must be whole numbers, e.g. 1000000,10000000`);
/** The other team's runs are numbered from here, apart from the measured team's. */
const OTHER_BASE = 100_000_000;
const REQUESTS = Number(process.env.REQUESTS ?? 300);
const WARMUP = Number(process.env.WARMUP ?? 30);
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
/** The measured team's key, for `get`. */
let apiKey;

const log = (line) => process.stdout.write(`${line}\n`);
const t0 = performance.now();
const elapsed = () => `${((performance.now() - t0) / 1000).toFixed(1)} s`;

// ---- database -------------------------------------------------------------------------------
const KEEP = process.env.RUNS_LIST_KEEP === '1';
if (KEEP && !process.env.DATABASE_URL)
  throw new Error('RUNS_LIST_KEEP=1 keeps the database DATABASE_URL names: set DATABASE_URL');
const dir = mkdtempSync(join(tmpdir(), 'factoryd-bench-'));
chmodSync(dir, 0o755); // as root the embedded server runs as `postgres`
let embedded;
let adminUrl;
if (process.env.DATABASE_URL) {
  adminUrl = process.env.DATABASE_URL;
} else {
  embedded = new EmbeddedPostgres({ dir: join(dir, 'pg'), durable: false });
  adminUrl = await embedded.start();
}
const dbUrl = new URL(adminUrl);
if (KEEP) {
  // CREATE DATABASE from the server's `postgres` database: the kept one may not exist yet.
  const dbName = decodeURIComponent(dbUrl.pathname.slice(1));
  const server = new URL(adminUrl);
  server.pathname = '/postgres';
  adminUrl = server.toString();
  await withClient(adminUrl, async (c) => {
    const { rowCount } = await c.query('SELECT 1 FROM pg_database WHERE datname = $1', [dbName]);
    if (!rowCount) await c.query(`CREATE DATABASE ${pg.escapeIdentifier(dbName)}`);
  });
} else {
  dbUrl.pathname = `/factoryd_bench_${process.pid}`;
  await withClient(adminUrl, (c) => c.query(`CREATE DATABASE factoryd_bench_${process.pid}`));
}

// No service-hosted workers: the seeded runs are data to list, not work to do.
const config = loadConfig({
  PORT: '0',
  LOG_LEVEL: 'error',
  DATA_DIR: dir,
  DATABASE_URL: dbUrl.toString(),
  WORKER_CONCURRENCY: '0',
});
// Started once for the migrations and the keys, then stopped while each size is seeded (its
// housekeeping scans the runs table, which has no indexes during the load), restarted to measure.
let service = await startService(config);
let running = true;
const sql = new pg.Client({ connectionString: dbUrl.toString() });
await sql.connect();

try {
  let authRepo = new AuthRepository(service.db);
  const auth = new AuthService(authRepo);
  await bootstrapDefaultTeam(authRepo, auth); // a kept database has its teams already
  const team = await authRepo.findTeamByName('default');
  const other = (await authRepo.findTeamByName('other')) ?? (await auth.createTeam('other'));
  const { key } = await auth.createApiKey({ teams: [team], scopes: ['runs:read'], name: 'bench' });
  apiKey = key;
  const [{ principal_id: creator }] = (
    await sql.query(
      `SELECT m.principal_id FROM team_members m JOIN principals p ON p.id = m.principal_id
        WHERE m.team_id = $1 AND p.display_name = 'admin'`,
      [team.id],
    )
  ).rows;

  let seeded = Number(
    (await sql.query('SELECT count(*) FROM runs WHERE team_id = $1', [team.id])).rows[0].count,
  );
  for (const size of SIZES) {
    if (seeded === size) {
      log('');
      log(`=== ${size.toLocaleString('en')} runs: already seeded (kept database)`);
    } else {
      if (running) await service.stop();
      running = false;
      await seedTo(size);
      service = await startService(config);
      running = true;
      authRepo = new AuthRepository(service.db);
    }
    await measure(size);
  }
  log(`total ${elapsed()}`);

  async function measure(size) {
    // ---- cases ----------------------------------------------------------------------------------
    const cases = [
      ['no filter', ''],
      ['state', 'state=FAILED'],
      ['state+name', 'state=FAILED&name=agent-7'],
      ['page 100 (cursor)', await cursorOfPage(100)],
      ['q', `q=${encodeURIComponent('billing webhook')}`],
    ];
    // EXTRA=1: filters without an index of their own, at their worst (few or no matches).
    if (process.env.EXTRA) {
      cases.push(
        ['model_id (no match)', 'model_id=none'],
        ['creator (no match)', 'creator=nobody'],
        ['metadata (rare)', 'metadata[repo]=service-7&metadata[ci]=true'],
        ['environment (rare)', 'environment_id=env-3&state=BLOCKED'],
        ['q (no match)', 'q=zzzz'],
        ['automation (no match)', 'automation_id=none'],
        ['created_after (none)', `created_after=2099-01-01T00:00:00Z`],
      );
    }

    const breakdown = [];
    log('');
    log(`${REQUESTS} sequential requests per case (after ${WARMUP} warm-up), keep-alive; times in ms`);
    log(
      `${'case'.padEnd(24)} ${'rows'.padStart(4)}  ${'HTTP p50'.padStart(8)} ${'HTTP p95'.padStart(8)}  ${'SQL p50'.padStart(8)} ${'SQL p95'.padStart(8)}  ${'ratio p50'.padStart(9)} ${'ratio p95'.padStart(9)}  target  ${'unprep50'.padStart(8)} ${'unprep95'.padStart(8)}`,
    );
    for (const [name, query] of cases) {
      const url = `${service.url}/api/v1/agent/runs${query ? `?${query}` : ''}`;
      const statement = buildRunListSql(team.id, parseRunListQuery(QueryParams.parse(query)));
      let body = '';
      // HTTP, the SQL and the SQL unprepared in turn, so all three see the same moments of a shared machine.
      // An HTTP sample ends with the answer's last byte: the client's JSON.parse of it (0.1 ms for 20
      // runs) is the client's work, and is done once, after the timing.
      const side = serviceSide();
      const [http, preparedSamples, unpreparedSamples] = await timeInTurn([
        async () => {
          side.begin();
          const res = await get(url);
          side.end();
          if (res.status !== 200) throw new Error(`${name}: HTTP ${res.status} ${res.body}`);
          body = res.body;
        },
        // As the service sends it: unfiltered, prepared once on this connection and reused (PostgreSQL
        // plans it afresh for its first five executions, then may keep a generic plan); filtered, unnamed.
        () =>
          statement.planEachTime
            ? sql.query(statement.sql, statement.params)
            : sql.query({ name: `p-${name}`, text: statement.sql, values: statement.params }),
        () => sql.query(statement.sql, statement.params),
      ]);
      side.stop();
      breakdown.push([name, stats(http), side.stats()]);
      const rows = JSON.parse(body).runs.length;
      const unprepared = stats(unpreparedSamples);
      const h = stats(http);
      const s = stats(preparedSamples);
      const ok = h.p95 <= 15 && h.p95 <= 2 * s.p95 ? 'met' : 'MISSED';
      log(
        `${`${name} @${size / 1e6}M`.padEnd(24)} ${String(rows).padStart(4)}  ${h.p50.toFixed(2).padStart(8)} ${h.p95.toFixed(2).padStart(8)}  ${s.p50.toFixed(2).padStart(8)} ${s.p95.toFixed(2).padStart(8)}  ${(h.p50 / s.p50).toFixed(2).padStart(9)} ${(h.p95 / s.p95).toFixed(2).padStart(9)}  ${ok.padEnd(6)}  ${unprepared.p50.toFixed(2).padStart(8)} ${unprepared.p95.toFixed(2).padStart(8)}`,
      );
      if (process.env.EXPLAIN) {
        const plan = await sql.query(`EXPLAIN (ANALYZE, BUFFERS) ${statement.sql}`, statement.params);
        log(plan.rows.map((r) => `    ${r['QUERY PLAN']}`).join('\n'));
      }
    }
    log('');
    log(
      'where the HTTP time goes, p50 in ms: the service from the request to its last byte, and its statement',
    );
    log(
      `${'case'.padEnd(24)} ${'HTTP'.padStart(6)} ${'service'.padStart(8)} ${'its SQL'.padStart(8)}  ${'client+transport'.padStart(16)} ${'service own'.padStart(11)}`,
    );
    for (const [name, h, s] of breakdown) {
      log(
        `${`${name} @${size / 1e6}M`.padEnd(24)} ${h.p50.toFixed(2).padStart(6)} ${s.service.p50.toFixed(2).padStart(8)} ${s.sql.p50.toFixed(2).padStart(8)}  ${(h.p50 - s.service.p50).toFixed(2).padStart(16)} ${(s.service.p50 - s.sql.p50).toFixed(2).padStart(11)}`,
      );
    }
    // Where the HTTP time goes: the framework alone (no auth, no database), and one round trip to the
    // database (what authenticating a key costs on top of the list query).
    const floor = stats(await time(() => get(`${service.url}/healthz`)));
    const roundTrip = stats(await time(() => sql.query('SELECT 1')));
    const keyHash = hashApiKey(key);
    const authSql = stats(await time(() => authRepo.findKeyByHash(keyHash)));
    const notFound = stats(
      await time(() => get(`${service.url}/api/v1/agent/runs/00000000-0000-4000-8000-000000000000`)),
    );
    log('');
    log(
      `reference: GET /healthz (HTTP + framework, no auth/DB) p50 ${floor.p50.toFixed(2)} p95 ${floor.p95.toFixed(2)}; ` +
        `SELECT 1 round trip p50 ${roundTrip.p50.toFixed(2)} p95 ${roundTrip.p95.toFixed(2)}`,
    );
    log(
      `reference: API key lookup (service pool) p50 ${authSql.p50.toFixed(2)} p95 ${authSql.p95.toFixed(2)}; ` +
        `GET /agent/runs/<unknown id> (auth + one lookup, 404) p50 ${notFound.p50.toFixed(2)} p95 ${notFound.p95.toFixed(2)}`,
    );
  }

  /**
   * Grows both teams' runs to `size` (and a fifth of it) in one transaction, so an interrupted seed
   * leaves the kept database as it was. The service is stopped meanwhile: its housekeeping scans runs.
   */
  async function seedTo(size) {
    const seedStart = performance.now();
    if (seeded > size) {
      await sql.query('TRUNCATE runs CASCADE');
      seeded = 0;
    }
    log('');
    log(
      `=== ${size.toLocaleString('en')} runs: seeding ${(size - seeded).toLocaleString('en')} more ` +
        `(+${Math.round((size - seeded) / 5).toLocaleString('en')} of another team)…`,
    );
    await sql.query('BEGIN');
    try {
      await sql.query(`SET LOCAL session_replication_role = replica`);
      await sql.query(`SET LOCAL maintenance_work_mem = '1GB'`);
      const indexes = (
        await sql.query(
          `SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'runs' AND indexname <> 'runs_pkey'`,
        )
      ).rows;
      for (const i of indexes) await sql.query(`DROP INDEX ${i.indexname}`);
      await seed(team.id, creator, seeded, size);
      await seed(other.id, null, OTHER_BASE + Math.round(seeded / 5), OTHER_BASE + Math.round(size / 5));
      const loaded = performance.now();
      for (const i of indexes) await sql.query(i.indexdef);
      await sql.query('COMMIT');
      log(
        `loaded in ${((loaded - seedStart) / 1000).toFixed(1)} s, indexed in ${((performance.now() - loaded) / 1000).toFixed(1)} s`,
      );
    } catch (err) {
      await sql.query('ROLLBACK');
      throw err;
    }
    await sql.query('ANALYZE runs');
    seeded = size;
    log(
      `seeded and analysed in ${((performance.now() - seedStart) / 1000).toFixed(1)} s (total ${elapsed()})`,
    );
  }

  async function cursorOfPage(n) {
    let cursor;
    for (let page = 1; page < n; page++) {
      const body = JSON.parse(
        (await get(`${service.url}/api/v1/agent/runs${cursor ? `?cursor=${cursor}` : ''}`)).body,
      );
      cursor = body.page_info.next_cursor;
    }
    return `cursor=${cursor}`;
  }
} finally {
  await sql.end();
  agent.destroy();
  if (running) await service.stop();
  if (!KEEP)
    await withClient(adminUrl, (c) =>
      c.query(`DROP DATABASE IF EXISTS ${dbUrl.pathname.slice(1)} WITH (FORCE)`),
    );
  await embedded?.stop();
  rmSync(dir, { recursive: true, force: true });
}

/**
 * Runs numbered `from + 1` to `to` of one team, in one statement: states, names, titles, prompts and
 * times spread out (run g was created 2 s after run g - 1, so a grown table keeps one timeline).
 */
async function seed(teamId, creatorId, from, to) {
  await sql.query(
    `INSERT INTO runs (id, team_id, title, prompt, state, source, creator_id, agent_config, config_name, model_id,
                       environment_id, skill_spec, worker_host, metadata, conversation_id, created_at, updated_at,
                       started_at, ended_at, search_text)
     SELECT id, $1, title, prompt, state, source, $2,
            jsonb_strip_nulls(jsonb_build_object('name', name, 'model_id', model, 'environment_id', env, 'skill_spec', skill)),
            name, model, env, skill, 'warp', meta, id, created, updated,
            CASE WHEN state NOT IN ('QUEUED', 'PENDING') THEN created + interval '5 seconds' END,
            CASE WHEN state IN ('SUCCEEDED', 'FAILED', 'ERROR', 'CANCELLED') THEN updated END,
            title || ' ' || prompt || ' ' || coalesce(skill, '')
       FROM (
         SELECT gen_random_uuid() AS id,
                (ARRAY['Fix', 'Add', 'Refactor', 'Update', 'Investigate', 'Upgrade', 'Document', 'Remove'])[1 + h % 8]
                  || ' ' || (ARRAY['flaky test', 'login page', 'billing webhook', 'CI pipeline', 'search index',
                                   'README', 'dependency', 'API client', 'cache layer', 'migrations'])[1 + (h / 8) % 10]
                  || ' #' || g AS title,
                'In acme/service-' || (h % 200) || ': '
                  || (ARRAY['the nightly build fails on arm64', 'users report a timeout after login',
                            'the webhook handler retries forever', 'bump the SDK to the latest minor',
                            'add tests for the edge cases', 'the dashboard shows stale numbers'])[1 + (h / 80) % 6]
                  || '. Open a pull request when done.' AS prompt,
                CASE WHEN r < 700 THEN 'SUCCEEDED' WHEN r < 820 THEN 'FAILED' WHEN r < 880 THEN 'CANCELLED'
                     WHEN r < 910 THEN 'ERROR' WHEN r < 950 THEN 'INPROGRESS' WHEN r < 975 THEN 'QUEUED'
                     WHEN r < 985 THEN 'BLOCKED' WHEN r < 995 THEN 'CLAIMED' ELSE 'PENDING' END AS state,
                (ARRAY['API', 'API', 'API', 'WEBHOOK', 'WEBHOOK', 'FACTORY', 'CLI', 'SCHEDULED_AGENT'])[1 + (h / 3) % 8] AS source,
                'agent-' || (h % 40) AS name,
                (ARRAY['claude-sonnet', 'gpt-5', 'gemini-pro'])[1 + (h / 40) % 3] AS model,
                CASE WHEN h % 5 = 0 THEN NULL ELSE 'env-' || (h % 12) END AS env,
                CASE WHEN h % 10 = 0 THEN 'acme/skills:review-' || (h % 7) END AS skill,
                CASE WHEN h % 3 = 0 THEN jsonb_build_object('repo', 'service-' || (h % 200), 'ci', 'true') END AS meta,
                timestamptz '2020-01-01Z' + g * interval '2 seconds' AS created,
                timestamptz '2020-01-01Z' + g * interval '2 seconds' + (h % 3600) * interval '1 second' AS updated
           FROM generate_series($3::int + 1, $4::int) AS g,
                LATERAL (SELECT (g::bigint * 2654435761) % 1000003 AS h) hh,
                LATERAL (SELECT ((g::bigint * 40503) % 1000) AS r) rr
       ) s`,
    [teamId, creatorId, from, to],
  );
}

/**
 * The service's side of the HTTP samples, one per request: from the server's `request` event to the
 * response's `finish`, and the time spent in its statements (`Database.queryWithin` for the page,
 * `query` for the key look-up). Timed only between `begin` and `end`, so the other samples' work is not counted.
 */
function serviceSide() {
  const server = service.app.getHttpAdapter().getInstance().server;
  const db = service.db;
  const samples = { service: [], sql: [] };
  let on = false;
  let inStatements = 0;
  const onRequest = (_req, res) => {
    if (!on) return;
    const start = performance.now();
    res.once('finish', () => {
      samples.service.push(performance.now() - start);
      samples.sql.push(inStatements);
    });
  };
  // The page's statement goes through queryWithin, the key look-up (when not cached) through query.
  const timed = ['query', 'queryWithin'];
  for (const method of timed) {
    const original = Object.getPrototypeOf(db)[method];
    db[method] = async function (...args) {
      const start = performance.now();
      try {
        return await original.apply(this, args);
      } finally {
        if (on) inStatements += performance.now() - start;
      }
    };
  }
  server.prependListener('request', onRequest);
  return {
    begin: () => ((on = true), (inStatements = 0)),
    end: () => (on = false),
    stop: () => {
      server.off('request', onRequest);
      for (const method of timed) delete db[method]; // back to Database.prototype's
    },
    // The warm-up's samples are left out, as timeInTurn leaves them out.
    stats: () => ({ service: stats(samples.service.slice(WARMUP)), sql: stats(samples.sql.slice(WARMUP)) }),
  };
}

/**
 * GET with the API key over one kept-alive connection. node:http rather than fetch: fetch's own work
 * (undici's request and response objects and web streams) took 0.3-0.4 ms a request in this process,
 * more than the service's, and would be counted as the service's.
 */
function get(url) {
  return new Promise((resolve, reject) => {
    http
      .get(url, { agent, headers: { authorization: `Bearer ${apiKey}` } }, (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(chunks).toString() }));
        res.on('error', reject);
      })
      .on('error', reject);
  });
}

/** Samples of each of `fns`, called in turn `REQUESTS` times after `WARMUP` rounds. */
async function timeInTurn(fns) {
  const out = fns.map(() => []);
  for (let i = 0; i < WARMUP + REQUESTS; i++) {
    for (const [j, fn] of fns.entries()) {
      const start = performance.now();
      await fn();
      if (i >= WARMUP) out[j].push(performance.now() - start);
    }
  }
  return out;
}

async function time(fn) {
  for (let i = 0; i < WARMUP; i++) await fn();
  const out = [];
  for (let i = 0; i < REQUESTS; i++) {
    const start = performance.now();
    await fn();
    out.push(performance.now() - start);
  }
  return out;
}

function stats(samples) {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (p) => sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)];
  return { p50: at(0.5), p95: at(0.95) };
}

async function withClient(url, work) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}
