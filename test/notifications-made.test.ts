import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DataSource } from 'typeorm';
import pg from 'pg';
import { MIGRATIONS } from '../src/database/migrations/index.js';
import { NotificationMessagesAtTheChange1763690540000 } from '../src/database/migrations/1763690540000-notification-messages-at-the-change.js';
import { NotificationFunctionsPlannedOnce1763690550000 } from '../src/database/migrations/1763690550000-notification-functions-planned-once.js';
import { NotificationMessagesCheaperToStore1763690570000 } from '../src/database/migrations/1763690570000-notification-messages-cheaper-to-store.js';
import { NotificationsRepository } from '../src/notifications/notifications.repository.js';
import { createTestDatabase } from './support/database.js';
import { eventually } from './support/eventually.js';
import { startTestService, type TestService } from './support/service.js';

// A state change makes its messages itself, in its own transaction (docs/notifications.md, "The
// delivery model"): what it commits is there for the dispatchers, what it rolls back was never made.
let t: TestService;
beforeAll(async () => {
  t = await startTestService({ NOTIFICATIONS_ALLOW_PRIVATE_URLS: 'true' });
});
afterAll(async () => {
  await t?.stop();
});

async function subscribe(key: string, body: Record<string, unknown>) {
  const res = await t.call('POST', '/api/v1/notifications/endpoints', body, key);
  expect(res.status).toBe(201);
  return (res.body as { endpoint: { id: string } }).endpoint.id;
}

const messagesOfRun = (runId: string) =>
  t.service.db.query<{ endpoint_id: string; type: string; status: string; delay_ms: number }>(
    `SELECT endpoint_id, type, status,
            (extract(epoch FROM next_attempt_at - event_at) * 1000)::int AS delay_ms
       FROM notification_messages WHERE run_id = $1 ORDER BY event_id, endpoint_id`,
    [runId],
  );

describe('messages made by the state change', () => {
  it('one per subscribed endpoint in the change’s transaction; none of a change rolled back', async () => {
    const { key } = await t.newTeam(`made-${Date.now()}`);
    const all = await subscribe(key, { name: 'all', url: 'http://127.0.0.1:9/all' });
    const cancelled = await subscribe(key, {
      name: 'cancelled',
      url: 'http://127.0.0.1:9/cancelled',
      event_types: ['run.cancelled'],
    });
    await subscribe(key, { name: 'off', url: 'http://127.0.0.1:9/off' }).then((id) =>
      t.call('PATCH', `/api/v1/notifications/endpoints/${id}`, { enabled: false }, key),
    );
    const created = await t.call('POST', '/api/v1/agent/runs', { prompt: 'Made at the change' }, key);
    expect(created.status).toBe(200);
    const runId = created.body.run_id as string;
    expect(await messagesOfRun(runId)).toEqual([
      { endpoint_id: all, type: 'run.queued', status: 'pending', delay_ms: 0 },
    ]);

    const change = `UPDATE runs SET state = 'CANCELLED', updated_at = now() WHERE id = $1`;
    await t.service.db
      .transaction(async (tx) => {
        await tx.query(change, [runId]);
        // Inside the transaction the messages are there; nobody else sees them before the commit.
        expect(await tx.query(`SELECT 1 FROM notification_messages WHERE run_id = $1`, [runId])).toHaveLength(
          3,
        );
        expect(await messagesOfRun(runId)).toHaveLength(1);
        await tx.query(`SELECT 1/0`);
      })
      .catch((err: Error) => expect(err.message).toMatch(/division by zero/));
    expect(await messagesOfRun(runId)).toHaveLength(1);

    await t.service.db.execute(change, [runId]);
    expect((await messagesOfRun(runId)).map((m) => [m.type, m.endpoint_id])).toEqual([
      ['run.queued', all],
      ...[
        ['run.cancelled', all],
        ['run.cancelled', cancelled],
      ].sort((x, y) => x[1]!.localeCompare(y[1]!)),
    ]);
  });

  it('waits the schedule’s first pause before the first attempt, as the dispatchers set it', async () => {
    const { key } = await t.newTeam(`first-pause-${Date.now()}`);
    const repo = new NotificationsRepository(t.service.db);
    await subscribe(key, { name: 'all', url: 'http://127.0.0.1:9/all' });
    const run = async () =>
      (await t.call('POST', '/api/v1/agent/runs', { prompt: 'Paused' }, key)).body.run_id as string;
    try {
      await repo.setFirstAttemptDelay(90_000);
      expect((await messagesOfRun(await run())).map((m) => m.delay_ms)).toEqual([90_000]);
    } finally {
      await repo.setFirstAttemptDelay(0);
    }
    expect((await messagesOfRun(await run())).map((m) => m.delay_ms)).toEqual([0]);
  });
});

// A message has no foreign key to its endpoint (storing one locked the endpoint's row in every state
// change): deleting an endpoint deletes its messages, and a team's advisory lock orders a deletion
// and the team's state changes in flight, so that none leaves a message of an endpoint that is gone.
describe('an endpoint deleted while its team changes runs', () => {
  async function endpointWithARun(name: string) {
    const { key } = await t.newTeam(`${name}-${Date.now()}`);
    const endpointId = await subscribe(key, { name: 'all', url: 'http://127.0.0.1:9/all' });
    const created = await t.call('POST', '/api/v1/agent/runs', { prompt: 'Deleted under it' }, key);
    expect(created.status).toBe(200);
    expect(await messagesOf(endpointId)).toHaveLength(1);
    return { key, endpointId, runId: created.body.run_id as string };
  }
  const messagesOf = (endpointId: string) =>
    t.service.db.query(`SELECT type FROM notification_messages WHERE endpoint_id = $1`, [endpointId]);
  const cancel = `UPDATE runs SET state = 'CANCELLED', updated_at = now() WHERE id = $1`;
  /** Whether a session of this test's database waits for an advisory lock. */
  const waitingForTheTeamLock = async () =>
    (
      await t.service.db.query(
        `SELECT 1 FROM pg_locks l JOIN pg_database d ON d.oid = l.database
          WHERE l.locktype = 'advisory' AND NOT l.granted AND d.datname = current_database()`,
      )
    ).length > 0;
  const session = async () => {
    const client = new pg.Client({ connectionString: t.databaseUrl });
    await client.connect();
    return client;
  };

  it('deletes its messages, those of a state change in flight too (the deletion waits for its commit)', async () => {
    const { key, endpointId, runId } = await endpointWithARun('deleted-after');
    const change = await session();
    try {
      await change.query('BEGIN');
      await change.query(cancel, [runId]);
      const deleted = t.call('DELETE', `/api/v1/notifications/endpoints/${endpointId}`, undefined, key);
      await eventually(waitingForTheTeamLock, 'the deletion waiting for the state change in flight');
      await change.query('COMMIT');
      expect((await deleted).status).toBe(204);
    } finally {
      await change.end();
    }
    expect(await messagesOf(endpointId)).toEqual([]);
  });

  it('makes no message of it in a state change that starts while the deletion is in flight', async () => {
    const { endpointId, runId } = await endpointWithARun('deleted-before');
    const deletion = await session();
    try {
      await deletion.query('BEGIN');
      await deletion.query(`DELETE FROM notification_endpoints WHERE id = $1`, [endpointId]);
      const changed = t.service.db.execute(cancel, [runId]);
      await eventually(waitingForTheTeamLock, 'the state change waiting for the deletion in flight');
      await deletion.query('COMMIT');
      await changed;
    } finally {
      await deletion.end();
    }
    expect(await messagesOf(endpointId)).toEqual([]);
    const [run] = await t.service.db.query<{ state: string }>(`SELECT state FROM runs WHERE id = $1`, [
      runId,
    ]);
    expect(run!.state).toBe('CANCELLED');
  });

  it('leaves other teams’ state changes alone: they take their own team’s lock', async () => {
    const { endpointId, runId } = await endpointWithARun('deleting');
    const other = await endpointWithARun('other');
    const deletion = await session();
    try {
      await deletion.query('BEGIN');
      await deletion.query(`DELETE FROM notification_endpoints WHERE id = $1`, [endpointId]);
      // Another team's state change does not wait for this deletion.
      await t.service.db.execute(cancel, [other.runId]);
      expect((await messagesOf(other.endpointId)).map((m) => m.type)).toEqual([
        'run.queued',
        'run.cancelled',
      ]);
      await deletion.query('ROLLBACK');
    } finally {
      await deletion.end();
    }
    await t.service.db.execute(cancel, [runId]);
    expect(await messagesOf(endpointId)).toHaveLength(2);
  });
});

describe('message ids', () => {
  it('are time-ordered (the UUIDv7 layout): version 7, the milliseconds of their making first', async () => {
    const { key } = await t.newTeam(`ids-${Date.now()}`);
    const endpointId = await subscribe(key, { name: 'all', url: 'http://127.0.0.1:9/all' });
    for (let n = 0; n < 5; n++)
      expect((await t.call('POST', '/api/v1/agent/runs', { prompt: `Run ${n}` }, key)).status).toBe(200);
    const ids = await t.service.db.query<{ id: string; version: string; ms: string; made_ms: string }>(
      `SELECT id, substr(id::text, 15, 1) AS version,
              ('x' || lpad(substr(replace(id::text, '-', ''), 1, 12), 16, '0'))::bit(64)::bigint::text AS ms,
              floor(extract(epoch FROM created_at) * 1000)::bigint::text AS made_ms
         FROM notification_messages WHERE endpoint_id = $1 ORDER BY event_id`,
      [endpointId],
    );
    expect(ids).toHaveLength(5);
    for (const id of ids) {
      expect(id.version).toBe('7');
      // Taken in the statement that made it, at or after its transaction's start (created_at).
      expect(Number(id.ms) - Number(id.made_ms)).toBeGreaterThanOrEqual(0);
      expect(Number(id.ms) - Number(id.made_ms)).toBeLessThan(60_000);
    }
    const prefixes = ids.map((id) => id.id.slice(0, 13));
    expect(prefixes).toEqual([...prefixes].sort());
  });
});

/** Migrates the database to the end of `migrations`; the DataSource is the caller's to destroy. */
async function migrateTo(url: string, migrations: typeof MIGRATIONS) {
  const ds = new DataSource({
    type: 'postgres',
    url,
    migrations,
    migrationsTableName: 'schema_migrations',
    migrationsTransactionMode: 'each',
  });
  await ds.initialize();
  await ds.runMigrations();
  return ds;
}

describe('the functions that make messages', () => {
  // In SQL, each state change planned their statements again (see the migration); PL/pgSQL keeps the
  // plans for the connection. The behaviour is the tests' above, which run on these.
  it('are PL/pgSQL with the statements as written, and undoing that gives the SQL back', async () => {
    const database = await createTestDatabase();
    const upTo = MIGRATIONS.indexOf(NotificationFunctionsPlannedOnce1763690550000);
    const functions = async (ds: DataSource) =>
      ds.query(
        `SELECT p.proname, l.lanname, p.prosrc FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
          WHERE p.proname IN ('notification_messages_of', 'notification_run_event') ORDER BY p.proname`,
      ) as Promise<{ proname: string; lanname: string; prosrc: string }[]>;
    const ds = await migrateTo(database.url, MIGRATIONS.slice(0, upTo));
    try {
      const asWritten = await functions(ds);
      expect(asWritten.map((f) => f.lanname)).toEqual(['sql', 'sql']);
      await ds.destroy();
      const upgraded = await migrateTo(database.url, MIGRATIONS.slice(0, upTo + 1));
      try {
        const planned = await functions(upgraded);
        expect(planned.map((f) => f.lanname)).toEqual(['plpgsql', 'plpgsql']);
        expect(planned[0]!.prosrc).toBe(`BEGIN ${asWritten[0]!.prosrc.trim()}; END`);
        expect(planned[1]!.prosrc).toBe(`BEGIN RETURN (${asWritten[1]!.prosrc.trim()}); END`);
        await upgraded.undoLastMigration({ transaction: 'each' });
        expect(await functions(upgraded)).toEqual(asWritten.map((f) => ({ ...f, prosrc: f.prosrc.trim() })));
      } finally {
        await upgraded.destroy();
      }
    } finally {
      if (ds.isInitialized) await ds.destroy();
      await database.drop();
    }
  });
});

describe('storing without the foreign key', () => {
  it('takes the key off, locks the team and deletes with a trigger; undoing it gives the key back', async () => {
    const database = await createTestDatabase();
    const upTo = MIGRATIONS.indexOf(NotificationMessagesCheaperToStore1763690570000);
    const schema = async (ds: DataSource) => {
      const [row] = await ds.query(
        `SELECT (SELECT prosrc FROM pg_proc WHERE oid = 'notification_messages_of(jsonb)'::regprocedure) AS body,
                (SELECT count(*)::int FROM pg_constraint WHERE conrelid = 'notification_messages'::regclass
                    AND contype = 'f') AS keys,
                (SELECT count(*)::int FROM pg_trigger WHERE tgname = 'notification_endpoints_deleted') AS triggers,
                pg_get_expr(d.adbin, d.adrelid) AS id_default
           FROM pg_attrdef d JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
          WHERE d.adrelid = 'notification_messages'::regclass AND a.attname = 'id'`,
      );
      return row as { body: string; keys: number; triggers: number; id_default: string };
    };
    const ds = await migrateTo(database.url, MIGRATIONS.slice(0, upTo));
    try {
      const before = await schema(ds);
      expect(before).toMatchObject({ keys: 1, triggers: 0, id_default: 'gen_random_uuid()' });
      await ds.destroy();
      const upgraded = await migrateTo(database.url, MIGRATIONS.slice(0, upTo + 1));
      try {
        const after = await schema(upgraded);
        expect(after).toMatchObject({ keys: 0, triggers: 1, id_default: 'notification_message_id()' });
        expect(after.body).toMatch(/^BEGIN PERFORM pg_advisory_xact_lock_shared\(/);
        expect(after.body).toContain(before.body.replace(/^BEGIN /, ''));
        await upgraded.undoLastMigration({ transaction: 'each' });
        expect(await schema(upgraded)).toEqual(before);
      } finally {
        await upgraded.destroy();
      }
    } finally {
      if (ds.isInitialized) await ds.destroy();
      await database.drop();
    }
  });
});

describe('upgrading from the outbox', () => {
  it('makes the events the outbox still held into messages, and later events take later ids', async () => {
    const database = await createTestDatabase();
    const upTo = MIGRATIONS.indexOf(NotificationMessagesAtTheChange1763690540000);
    const before = await migrateTo(database.url, MIGRATIONS.slice(0, upTo));
    let after: DataSource | undefined;
    try {
      const [team] = await before.query(
        `INSERT INTO teams (uid, name) VALUES ('UpgradeTeam000000000001', 'upgrade') RETURNING id`,
      );
      await before.query(
        `INSERT INTO notification_endpoints (id, team_id, name, url, event_types)
         VALUES (gen_random_uuid(), $1, 'all', 'http://127.0.0.1:9/', '{}'),
                (gen_random_uuid(), $1, 'rejected only', 'http://127.0.0.1:9/', '{delivery.rejected}')`,
        [team.id],
      );
      const left = await before.query(
        `INSERT INTO notification_outbox (team_id, type, payload)
         SELECT $1, 'run.queued', jsonb_build_object('n', n) FROM generate_series(1, 3) n RETURNING id`,
        [team.id],
      );
      await before.destroy();

      after = await migrateTo(database.url, MIGRATIONS);
      const messages = await after.query(
        `SELECT m.event_id::int AS event_id, m.payload->>'n' AS n, m.status, e.name
           FROM notification_messages m JOIN notification_endpoints e ON e.id = m.endpoint_id ORDER BY m.event_id`,
      );
      expect(messages).toEqual(
        left.map((row: { id: string }, i: number) => ({
          event_id: Number(row.id),
          n: String(i + 1),
          status: 'pending',
          name: 'all',
        })),
      );
      expect(await after.query(`SELECT to_regclass('notification_outbox') AS outbox`)).toEqual([
        { outbox: null },
      ]);
      const [next] = await after.query(`SELECT nextval('notification_event_ids')::int AS id`);
      expect(next.id).toBeGreaterThan(Number(left.at(-1).id));
    } finally {
      if (before.isInitialized) await before.destroy();
      await after?.destroy();
      await database.drop();
    }
  });
});
