import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RUNS_QUEUED_CHANNEL } from '../src/runs/runs-signal.js';
import { RunsRepository } from '../src/runs/runs.repository.js';
import { eventually } from './support/eventually.js';
import { startTestService, type TestService } from './support/service.js';

// A worker woken by "runs were queued" claims at once: the wake-up must not arrive before the runs
// it announces are committed, or the claim finds nothing and the run waits for the next poll.
let t: TestService;
let listener: pg.Client;
/** For each wake-up, in order of arrival: how many of the runs titled `expected` it finds visible. */
let wakeups: Promise<number>[] = [];
let expected = '';
/** Payloads of the test's own notifications on the channel (the service's wake-ups carry ''). */
let markers: string[] = [];
beforeAll(async () => {
  t = await startTestService();
  listener = new pg.Client({ connectionString: t.service.databaseServer.url });
  await listener.connect();
  listener.on('notification', (n) => {
    if (n.channel !== RUNS_QUEUED_CHANNEL) return;
    if (n.payload) return void markers.push(n.payload);
    wakeups.push(
      t.service.db
        .query<{ n: number }>(`SELECT count(*)::int AS n FROM runs WHERE title = $1`, [expected])
        .then(([r]) => r!.n),
    );
  });
  await listener.query(`LISTEN ${RUNS_QUEUED_CHANNEL}`);
});
afterAll(async () => {
  await listener?.end();
  await t?.stop();
});

async function firstWakeup(): Promise<number> {
  return (await eventually(() => wakeups[0], 'a wake-up'))!;
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
      // A notification sent after the insert from outside the transaction: PostgreSQL delivers
      // notifications in commit order, so once this marker has arrived, a wake-up sent before the
      // commit would have arrived too. A worker woken now would find nothing.
      markers = [];
      await new Promise((r) => setImmediate(r)); // a signal is sent on the next turn of the event loop
      await t.service.db.execute(`SELECT pg_notify($1, 'marker')`, [RUNS_QUEUED_CHANNEL]);
      await eventually(() => markers.includes('marker'), 'the marker notification');
      expect(wakeups).toHaveLength(0);
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
