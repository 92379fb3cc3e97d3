import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHANNELS } from '../src/database/channels.js';
import { Notifications } from '../src/database/notifications.js';
import { RunWakeups } from '../src/workers/queue/run-wakeups.js';
import { createFactory, createWebhook, deliver } from './support/definitions.js';
import { eventually } from './support/eventually.js';
import { startTestService, type TestService } from './support/service.js';

// One LISTEN connection per process; a change of this process reaches its own subscribers at the
// commit, the others by NOTIFY; after the connection is cut, every subscriber resyncs.
let t: TestService;
let notifications: Notifications;
/** A connection of the test's own, outside the service: another replica. */
let other: pg.Client;

/** Factory ids as payloads (what the channel carries; no such factories exist). */
const ids = { local: randomUUID(), later: randomUUID(), rolledBack: randomUUID(), after: randomUUID() };
const more = [randomUUID(), randomUUID(), randomUUID(), randomUUID()];

/** A subscriber that records what it is told. */
function recorder<T>() {
  const r = { notified: [] as T[], resyncs: 0 };
  return { r, subscriber: { notified: (p: T) => void r.notified.push(p), resync: () => void r.resyncs++ } };
}

/** The service's connections that LISTEN (their last statement was a LISTEN). */
const listeners = async () =>
  (
    await other.query<{ pid: number }>(
      `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()
          AND query ILIKE 'LISTEN%'`,
    )
  ).rows.map((r) => r.pid);

beforeAll(async () => {
  t = await startTestService();
  notifications = t.service.app.get(Notifications);
  other = new pg.Client({ connectionString: t.databaseUrl });
  other.on('error', () => undefined);
  await other.connect();
});
afterAll(async () => {
  await other?.end();
  await t?.stop();
});

describe('the notifications of a process', () => {
  it('one connection listens for the whole process (applies, queued runs, run control)', async () => {
    await eventually(() => notifications.backendPid, 'the listener to connect');
    expect(await listeners()).toEqual([notifications.backendPid]);
  });

  it('a change of this process reaches its subscribers at its commit, once; NOTIFY reaches the others', async () => {
    const mine = recorder<string>();
    const off = notifications.subscribe(CHANNELS.definitionsApplied, mine.subscriber);
    const elsewhere: string[] = [];
    other.on(
      'notification',
      (n) => n.channel === CHANNELS.definitionsApplied.name && elsewhere.push(n.payload!),
    );
    await other.query(`LISTEN ${CHANNELS.definitionsApplied.name}`);
    try {
      await t.service.db.transaction(async (tx) => {
        await notifications.publish(CHANNELS.definitionsApplied, ids.local, tx);
        expect(mine.r.notified).toEqual([]); // not before the commit
      });
      expect(mine.r.notified).toEqual([ids.local]); // at the commit, no round trip
      await eventually(() => elsewhere.includes(ids.local), 'the NOTIFY at another connection');
      // Notifications arrive in commit order: once a later one has arrived, the echo of ours has too.
      await other.query(`SELECT pg_notify($1, $2)`, [CHANNELS.definitionsApplied.name, ids.later]);
      await eventually(() => mine.r.notified.includes(ids.later), 'the later notification');
      expect(mine.r.notified).toEqual([ids.local, ids.later]);
    } finally {
      off();
      await other.query(`UNLISTEN *`);
    }
  });

  it('a transaction that rolls back announces nothing', async () => {
    const mine = recorder<string>();
    const off = notifications.subscribe(CHANNELS.definitionsApplied, mine.subscriber);
    try {
      await expect(
        t.service.db.transaction(async (tx) => {
          await notifications.publish(CHANNELS.definitionsApplied, ids.rolledBack, tx);
          throw new Error('abandon');
        }),
      ).rejects.toThrow('abandon');
      await other.query(`SELECT pg_notify($1, $2)`, [CHANNELS.definitionsApplied.name, ids.after]);
      await eventually(() => mine.r.notified.includes(ids.after), 'the later notification');
      expect(mine.r.notified).toEqual([ids.after]);
    } finally {
      off();
    }
  });

  it('a subscriber that throws does not stop the others or the listener', async () => {
    const good = recorder<string>();
    const offBad = notifications.subscribe(CHANNELS.definitionsApplied, {
      notified: () => {
        throw new Error('broken subscriber');
      },
      resync: () => Promise.reject(new Error('broken resync')),
    });
    const offGood = notifications.subscribe(CHANNELS.definitionsApplied, good.subscriber);
    try {
      await other.query(`SELECT pg_notify($1, $2)`, [CHANNELS.definitionsApplied.name, more[0]!]);
      await other.query(`SELECT pg_notify($1, $2)`, [CHANNELS.definitionsApplied.name, more[1]!]);
      await eventually(() => good.r.notified.length === 2, 'both notifications');
      // A payload that is not one of ours is dropped, not thrown (nor handed to the ingress's cache,
      // whose lookups would then fail: the next test delivers).
      await other.query(`SELECT pg_notify($1, 'not json')`, [CHANNELS.runControl.name]);
      await other.query(`SELECT pg_notify($1, 'not a factory id')`, [CHANNELS.definitionsApplied.name]);
      await other.query(`SELECT pg_notify($1, $2)`, [CHANNELS.definitionsApplied.name, more[2]!]);
      await eventually(() => good.r.notified.includes(more[2]!), 'the next notification');
    } finally {
      offBad();
      offGood();
    }
  });

  it('after the listener is cut (pg_terminate_backend) every subscriber resyncs, and notifications arrive again', async () => {
    const factory = await createFactory(t);
    const hook = await createWebhook(t, factory);
    const bearer = { authorization: `Bearer ${hook.secret}` };
    expect((await deliver(t.url, `/webhooks/w/${hook.uid}`, '{}', bearer)).status).toBe(202);
    // Changed without a notification (as if it was sent while the listener was away): the ingress
    // still knows the webhook as enabled until it resyncs.
    await t.service.db.execute(`UPDATE webhooks SET enabled = false WHERE id = $1`, [hook.id]);
    expect((await deliver(t.url, `/webhooks/w/${hook.uid}`, '{"again":1}', bearer)).status).toBe(202);

    const applies = recorder<string>();
    const controls = recorder<{ run_id: string; kind: string }>();
    const offs = [
      notifications.subscribe(CHANNELS.definitionsApplied, applies.subscriber),
      notifications.subscribe(CHANNELS.runControl, controls.subscriber),
    ];
    const wakeups = t.service.app.get(RunWakeups);
    const generation = wakeups.generation;
    const cut = await eventually(() => notifications.backendPid, 'the listener to connect');
    try {
      const { rows } = await other.query<{ ok: boolean }>(`SELECT pg_terminate_backend($1) AS ok`, [cut]);
      expect(rows[0]!.ok).toBe(true);

      await eventually(
        () => applies.r.resyncs === 1 && controls.r.resyncs === 1,
        'a resync of each subscriber',
      );
      // The service's own subscribers resynced too: waiting workers were woken, the ingress reloaded.
      expect(wakeups.generation).toBeGreaterThan(generation);
      await eventually(
        async () => (await deliver(t.url, `/webhooks/w/${hook.uid}`, '{"n":3}', bearer)).status === 404,
        'the ingress to reload the webhooks',
      );
      expect(notifications.backendPid).not.toBe(cut);
      // Still one: the cut backend is gone (its exit may show a moment later), a new one listens.
      await eventually(
        async () => JSON.stringify(await listeners()) === JSON.stringify([notifications.backendPid]),
        'a single listener again',
      );

      await other.query(`SELECT pg_notify($1, $2)`, [CHANNELS.definitionsApplied.name, more[3]!]);
      await other.query(`SELECT pg_notify($1, $2)`, [
        CHANNELS.runControl.name,
        JSON.stringify({ run_id: 'r-after', kind: 'cancel' }),
      ]);
      await eventually(() => applies.r.notified.includes(more[3]!), 'an apply notification');
      await eventually(() => controls.r.notified.some((c) => c.run_id === 'r-after'), 'a run control');
      expect(controls.r.notified).toEqual([{ run_id: 'r-after', kind: 'cancel' }]);
    } finally {
      for (const off of offs) off();
    }
  });
});
