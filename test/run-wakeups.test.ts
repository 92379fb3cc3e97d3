import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RUNS_QUEUED_CHANNEL } from '../src/runs/runs-signal.js';
import { RunsRepository } from '../src/runs/runs.repository.js';
import { startTestService, type TestService } from './support/service.js';

// A worker woken by "runs were queued" claims at once: the wake-up must not arrive before the runs
// it announces are committed, or the claim finds nothing and the run waits for the next poll.
let t: TestService;
let listener: pg.Client;
/** For each wake-up: how many of the runs titled `expected` were visible when it arrived. */
let wakeups: number[] = [];
let expected = '';
beforeAll(async () => {
  t = await startTestService();
  listener = new pg.Client({ connectionString: t.service.databaseServer.url });
  await listener.connect();
  listener.on('notification', (n) => {
    if (n.channel !== RUNS_QUEUED_CHANNEL) return;
    void t.service.db
      .query<{ n: number }>(`SELECT count(*)::int AS n FROM runs WHERE title = $1`, [expected])
      .then(([r]) => wakeups.push(r!.n));
  });
  await listener.query(`LISTEN ${RUNS_QUEUED_CHANNEL}`);
});
afterAll(async () => {
  await listener?.end();
  await t?.stop();
});

async function firstWakeup(): Promise<number> {
  const deadline = Date.now() + 5000;
  while (!wakeups.length && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  expect(wakeups.length).toBeGreaterThan(0);
  return wakeups[0]!;
}

describe('the "runs were queued" wake-up', () => {
  it('arrives after the commit of the transaction that queued the run, not while it is open', async () => {
    const { team } = await t.newTeam('wakeups');
    const runs = t.service.app.get(RunsRepository);
    wakeups = [];
    expected = 'queued in a slow transaction';
    await t.service.db.transaction(async (tx) => {
      await runs.insert(
        tx,
        { teamId: team.id, title: expected, prompt: 'p', source: 'API', creatorId: null, agentConfig: {} },
        new Date(),
      );
      // Whatever else the transaction does takes a while; a worker woken now would find nothing.
      await new Promise((r) => setTimeout(r, 300));
      expect(wakeups).toEqual([]);
    });
    expect(await firstWakeup()).toBe(1);
  });

  it('arrives after a run created on its own is visible', async () => {
    expected = 'created on its own';
    wakeups = [];
    const res = await t.call('POST', '/api/v1/agent/runs', { prompt: 'x', title: expected });
    expect(res.status).toBe(200);
    expect(await firstWakeup()).toBe(1);
  });
});
