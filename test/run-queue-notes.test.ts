import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Queryable } from '../src/database/database.js';
import { liveSince } from '../src/workers/queue/run-decisions.js';
import { RunQueueRepository } from '../src/workers/queue/run-queue.repository.js';
import { WorkersRepository } from '../src/workers/queue/workers.repository.js';
import { runPolicy, WorkerRunsService } from '../src/workers/queue/worker-runs.service.js';
import { loadConfig } from '../src/config/config.js';
import { eventually } from './support/eventually.js';
import { startTestService, type TestService } from './support/service.js';

// The housekeeping's "no self-hosted worker connected" notes write QUEUED runs' rows, and a claim
// passes over locked rows (FOR UPDATE SKIP LOCKED). Held open here the way a slow pass holds them,
// against the real PostgreSQL: a claim must still get every claimable run.
let t: TestService;
beforeAll(async () => {
  t = await startTestService();
});
afterAll(async () => t?.stop());

describe('the notes for runs waiting for a self-hosted worker', () => {
  it('never make a claim come back empty while the runs it may take are queued', async () => {
    const db = t.service.db;
    const { team, key } = await t.newTeam('notes');
    const ids: string[] = [];
    for (const n of [1, 2, 3]) {
      const res = await t.call(
        'POST',
        '/api/v1/agent/runs',
        { prompt: `for the box ${n}`, config: { worker_host: 'box-n' } },
        key,
      );
      expect(res.status).toBe(200);
      ids.push(res.body.run_id);
    }
    const queue = new RunQueueRepository(db);
    const policy = runPolicy(loadConfig({}));
    // No worker for box-n yet: the runs say so.
    await queue.noteUnservedHosts(liveSince(new Date(), policy));
    const notes = await db.query<{ note: string | null }>(
      `SELECT status_message->>'message' AS note FROM runs WHERE id = ANY($1::uuid[])`,
      [ids],
    );
    expect(notes.map((r) => r.note)).toEqual(
      Array(3).fill(expect.stringMatching(/Waiting for self-hosted worker/)),
    );

    // The worker comes: the next pass clears the notes, in a transaction held open meanwhile.
    const box = { id: 'notes-box-1', host: 'box-n', teamId: team.id };
    await new WorkersRepository(db).register(box, new Date());
    let endPass!: () => void;
    const passHeld = new Promise<void>((resolve) => (endPass = resolve));
    let cleared = -1;
    const pass = db.transaction(async (tx) => {
      ({ cleared } = await queue.noteUnservedHostsIn(tx, liveSince(new Date(), policy)));
      await passHeld;
    });
    await eventually(() => cleared >= 0, 'the pass to write its notes');
    expect(cleared).toBe(3);

    const workerRuns = t.service.app.get(WorkerRunsService);
    let claimed: string[] | undefined;
    const claim = workerRuns.claim(box, 3).then((runs) => (claimed = runs.map((r) => r.run_id)));
    // The claim either waits for the pass (as it must) or has already come back.
    await eventually(async () => {
      if (claimed) return true;
      const [waiting] = await db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%advisory%'`,
      );
      return waiting!.n > 0;
    }, 'the claim to wait for the pass or come back');
    endPass();
    await pass;
    await claim;
    expect(claimed!.sort()).toEqual([...ids].sort());
  });

  it('read the self-hosted queue through its own index, planned for any values', async () => {
    const db = t.service.db;
    const { team } = await t.newTeam('notes-plan');
    // A history of ended runs; the queue itself is small.
    await db.execute(
      `INSERT INTO runs (id, team_id, title, prompt, search_text, state, source, conversation_id, created_at, updated_at)
       SELECT gen_random_uuid(), $1, 'old ' || i, 'old', 'old', 'SUCCEEDED', 'API', gen_random_uuid(), now(), now()
         FROM generate_series(1, 3000) AS i`,
      [team.id],
    );
    await db.execute(`ANALYZE runs`);
    const sent: Array<{ sql: string; params: unknown[] }> = [];
    const recording: Queryable = {
      query: async () => [],
      execute: async (sql, params) => (sent.push({ sql, params: params ?? [] }), 0),
      afterCommit: (fn) => fn(),
    };
    await new RunQueueRepository(db).noteUnservedHostsIn(recording, new Date());
    const onRuns = sent.filter((s) => /\bruns\b/.test(s.sql));
    expect(onRuns).toHaveLength(2);
    const client = new pg.Client({ connectionString: t.service.databaseServer.url });
    await client.connect();
    try {
      await client.query(`SET plan_cache_mode = force_generic_plan`);
      for (const [i, s] of onRuns.entries()) {
        await client.query(`PREPARE notes${i} AS ${s.sql}`);
        const args = s.params.map((v) => client.escapeLiteral((v as Date).toISOString())).join(', ');
        const plan = await client.query(`EXPLAIN EXECUTE notes${i}(${args})`);
        const text = plan.rows.map((r: Record<string, string>) => r['QUERY PLAN']).join('\n');
        expect(text).toMatch(/Index Scan using runs_self_hosted_queue on runs\b/);
        expect(text).not.toMatch(/Seq Scan on runs\b/);
      }
    } finally {
      await client.end();
    }
  });
});
