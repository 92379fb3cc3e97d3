import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Database } from '../src/database/database.js';
import { RunsRepository } from '../src/runs/runs.repository.js';
import { loadConfig } from '../src/config/config.js';
import {
  runPolicy,
  WorkerRunsService,
  type WorkerIdentity,
} from '../src/workers/queue/worker-runs.service.js';
import { startTestService, type TestService } from './support/service.js';
import { McpCredentials } from '../src/secrets/mcp-credentials.js';

// The workers' statements run as prepared statements, which PostgreSQL may plan once for any values
// (a generic plan). Planned that way, none of them may read the whole runs table: a claim, a lease
// renewal or the reaper that scans every run ever made slows with the table's age.
let t: TestService;
beforeAll(async () => {
  t = await startTestService();
});
afterAll(async () => t?.stop());

interface Sent {
  text: string;
  values: unknown[];
}

/** The pool, recording every statement with parameters sent through it (or a client it lends). */
function recording(pool: pg.Pool, sent: Sent[]): pg.Pool {
  const recordQuery =
    (target: pg.Pool | pg.PoolClient) =>
    (q: unknown, ...rest: unknown[]) => {
      const c = q as Partial<Sent>;
      if (typeof q === 'object' && c.text && c.values) sent.push({ text: c.text, values: c.values });
      return (target.query as (...a: unknown[]) => unknown)(q, ...rest);
    };
  const wrap = <T extends object>(target: T, extra: Record<string | symbol, unknown>): T =>
    new Proxy(target, {
      get(o, prop) {
        if (prop in extra) return extra[prop];
        const v = Reflect.get(o, prop) as unknown;
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(o) : v;
      },
    });
  return wrap(pool, {
    query: recordQuery(pool),
    connect: async () => {
      const client = await pool.connect();
      return wrap(client, { query: recordQuery(client) });
    },
  });
}

/** `value` as an SQL literal (its type comes from the prepared statement). */
function literal(client: pg.Client, value: unknown): string {
  if (value === null || value === undefined) return 'NULL';
  if (value instanceof Date) return client.escapeLiteral(value.toISOString());
  if (Array.isArray(value))
    return client.escapeLiteral(`{${value.map((v) => JSON.stringify(String(v))).join(',')}}`);
  return client.escapeLiteral(typeof value === 'object' ? JSON.stringify(value) : String(value));
}

describe("the workers' statements, planned for any values", () => {
  it('read runs through an index: both claims, lease renewal, reports, the reapers, lost workers', async () => {
    const db = t.service.db;
    const { team, key } = await t.newTeam('plans');
    // A table with a history: ended runs around the live ones.
    await db.execute(
      `INSERT INTO runs (id, team_id, title, prompt, search_text, state, source, conversation_id, created_at, updated_at)
       SELECT gen_random_uuid(), $1, 'old ' || i, 'old', 'old', 'SUCCEEDED', 'API', gen_random_uuid(), now(), now()
         FROM generate_series(1, 3000) AS i`,
      [team.id],
    );
    for (let i = 0; i < 3; i++) await t.call('POST', '/api/v1/agent/runs', { prompt: `live ${i}` }, key);
    await t.call('POST', '/api/v1/agent/runs', { prompt: 'on a box', config: { worker_host: 'box' } }, key);
    await db.execute(`ANALYZE runs`);

    const sent: Sent[] = [];
    const recorded = new Database(recording(db.pool, sent), db.dataSource);
    const workerRuns = new WorkerRunsService(
      recorded,
      new RunsRepository(recorded, t.service.app.get(McpCredentials)),
      runPolicy(loadConfig({})),
    );
    // A service-hosted worker (the fair claim) and a self-hosted one (its own team's runs).
    const w: WorkerIdentity = { id: 'plans-w1', host: 'warp', teamId: null, slots: 2 };
    await workerRuns.register(w);
    const [a] = await workerRuns.claim(w, 1);
    expect(a).toBeDefined();
    const box: WorkerIdentity = { id: 'plans-box', host: 'box', teamId: team.id };
    expect(await workerRuns.claim(box, 1)).toHaveLength(1);
    await workerRuns.heartbeat(w, [a!.run_id]);
    await workerRuns.record(
      w,
      a!.run_id,
      a!.execution,
      [{ type: 'message', role: 'assistant', text: 'hi' }],
      5,
    );
    await workerRuns.finish(w, a!.run_id, a!.execution, {
      exitCode: 0,
      signal: null,
      lastLines: [],
    });
    await workerRuns.reap();
    await workerRuns.endOverdue();
    await workerRuns.lost(w, ['plans-w0']);

    const onRuns = sent.filter((s) => /\b(FROM|UPDATE) runs\b/.test(s.text));
    expect(onRuns.length).toBeGreaterThanOrEqual(7);
    const client = new pg.Client({ connectionString: t.service.databaseServer.url });
    await client.connect();
    try {
      await client.query(`SET plan_cache_mode = force_generic_plan`);
      const seqScans: string[] = [];
      for (const [i, s] of onRuns.entries()) {
        await client.query(`PREPARE p${i} AS ${s.text}`);
        const args = s.values.map((v) => literal(client, v)).join(', ');
        // The plan alone (not EXPLAIN ANALYZE): the statements' effects are not wanted twice.
        const plan = await client.query(`EXPLAIN EXECUTE p${i}(${args})`);
        const text = plan.rows.map((r: Record<string, string>) => r['QUERY PLAN']).join('\n');
        if (/Seq Scan on runs\b/.test(text)) seqScans.push(`${s.text.slice(0, 120)}…\n${text}`);
      }
      expect(seqScans).toEqual([]);
    } finally {
      await client.end();
    }
  });
});
