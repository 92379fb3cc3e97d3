// bench/notification-storing: what storing one notification message costs PostgreSQL — the work every
// subscribed endpoint adds to its team's state changes, whether it answers or not (what a failing
// endpoint of one team costs the others, docs/notifications.md "Bounds"). The function every state
// change calls (notification_messages_of) is called BENCH_STORING_MESSAGES (20,000) times, one event
// each, with the team's endpoint enabled (a message stored per call) and, as the baseline in the same
// run, disabled (the same call storing nothing); the difference is the message. Three rounds of each,
// alternated (the table grows as it goes); the medians are printed. Three ways: each call in a
// transaction of its own, as state changes are (what a lock per transaction costs shows; commits
// asynchronous, so the disk's flush is not timed); the same from two sessions at once, as a team's
// state changes are in flight side by side (what their locks on one row cost shows: multixacts); and
// all calls in one transaction. Then by part, in one transaction: each of the table's indexes, and any
// foreign key, dropped in a transaction that is rolled back, and the same calls timed without it: what
// that part costs a message. Time is the statements' (PostgreSQL's CPU, no round trips; wall time ×
// sessions at once); WAL from the insert position before and after; multixacts from the database's
// multixact age. Prints figures; never fails on a time.
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { openDatabase } from '../dist/database/data-source.js';
import { benchDatabase } from './ingress-kit.js';

const MESSAGES = Number(process.env.BENCH_STORING_MESSAGES ?? 20_000);
if (!Number.isInteger(MESSAGES) || MESSAGES < 1) {
  console.error(
    `BENCH_STORING_MESSAGES: "${process.env.BENCH_STORING_MESSAGES}" is not a whole number, 1 or more`,
  );
  process.exit(2);
}
const ROUNDS = 3;

const database = await benchDatabase();
await (await openDatabase(database.url, 1)).destroy(); // the migrations
const db = new pg.Client({ connectionString: database.url });
await db.connect();
const one = async (sql, params) => (await db.query(sql, params)).rows[0];
const team = await one(`INSERT INTO teams (uid, name) VALUES ('storing', 'storing') RETURNING id`);
const endpoint = await one(
  `INSERT INTO notification_endpoints (id, team_id, name, url) VALUES (gen_random_uuid(), $1, 'a', 'http://127.0.0.1:9/') RETURNING id`,
  [team.id],
);
const enable = (on) =>
  db.query(`UPDATE notification_endpoints SET enabled = $1 WHERE id = $2`, [on, endpoint.id]);

/** Sessions beside `db` for the calls made at once (synchronous_commit off, as `db`). */
const SESSIONS = 2;
const sessions = [db];
for (let k = 1; k < SESSIONS; k++) {
  const session = new pg.Client({ connectionString: database.url });
  await session.connect();
  await session.query(`SET synchronous_commit = off`);
  sessions.push(session);
}
await db.query(`SET synchronous_commit = off`);

/** Multixacts made in the cluster so far (the next one's distance from the database's oldest). */
const multixacts = async () =>
  Number(
    (
      await one(
        `SELECT mxid_age(datminmxid)::float8 AS n FROM pg_database WHERE datname = current_database()`,
      )
    ).n,
  );

/**
 * MESSAGES calls, each with one run event of the team as a state change makes it, each committed
 * on its own (`ownTransactions`) or not, split over `at once` sessions running side by side: µs of a
 * session (wall time × sessions), WAL bytes and multixacts a call.
 */
async function calls(ownTransactions, atOnce = 1) {
  const before = await one(`SELECT pg_current_wal_insert_lsn() AS lsn`);
  const multixactsBefore = await multixacts();
  const started = performance.now();
  await Promise.all(
    sessions.slice(0, atOnce).map((session) =>
      session.query(`
        DO $$ BEGIN
          FOR i IN 1..${Math.ceil(MESSAGES / atOnce)} LOOP
            PERFORM notification_messages_of(jsonb_build_array(jsonb_build_object(
              'id', nextval('notification_event_ids'), 'team_id', '${team.id}'::uuid, 'factory_id', NULL,
              'type', 'run.queued', 'run_id', gen_random_uuid(), 'at', clock_timestamp(),
              'payload', jsonb_build_object('run_id', gen_random_uuid(), 'state', 'QUEUED', 'previous_state', NULL,
                                            'title', 'a run', 'source', 'API', 'status_message', NULL,
                                            'updated_at', clock_timestamp()))));
            ${ownTransactions ? 'COMMIT;' : ''}
          END LOOP;
        END $$`),
    ),
  );
  const calls = Math.ceil(MESSAGES / atOnce) * atOnce;
  const us = ((performance.now() - started) * 1000 * atOnce) / calls;
  const wal = await one(`SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1)::float8 AS bytes`, [
    before.lsn,
  ]);
  return { us, wal: wal.bytes / calls, multixacts: ((await multixacts()) - multixactsBefore) / calls };
}
const median = (xs) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];

/** A message's cost: ROUNDS alternated pairs of calls storing one and storing none; the medians. */
async function perMessage(ownTransactions = false, atOnce = 1) {
  const stored = [];
  const none = [];
  for (let k = 0; k < ROUNDS; k++) {
    await enable(true);
    stored.push(await calls(ownTransactions, atOnce));
    await enable(false);
    none.push(await calls(ownTransactions, atOnce));
  }
  await enable(true);
  const us = median(stored.map((c) => c.us));
  const baseline = median(none.map((c) => c.us));
  return {
    us,
    baseline,
    message: us - baseline,
    wal: median(stored.map((c) => c.wal)) - median(none.map((c) => c.wal)),
    multixacts: median(stored.map((c) => c.multixacts)) - median(none.map((c) => c.multixacts)),
  };
}

const print = (m, how) =>
  console.log(
    `bench/notification-storing: storing one message ${m.message.toFixed(0)} µs, ${m.wal.toFixed(0)} B of WAL ` +
      `and ${m.multixacts.toFixed(2)} multixacts, ${how} ` +
      `(a call storing it ${m.us.toFixed(0)} µs; the baseline, the same call with the endpoint disabled, ${m.baseline.toFixed(0)} µs: ` +
      `${(m.us / m.baseline).toFixed(2)} ×; ${MESSAGES} calls, median of ${ROUNDS} rounds)`,
  );
print(await perMessage(true), 'each call its own transaction');
print(
  await perMessage(true, SESSIONS),
  `each call its own transaction, ${SESSIONS} sessions at once (the team's transactions in flight side by side)`,
);
const all = await perMessage();
print(all, 'all calls in one transaction');

// Each index (one behind a primary key or unique constraint goes with its constraint), then each
// foreign key: the statement that drops it.
const parts = [
  ...(
    await db.query(
      `SELECT i.indexname AS name, c.conname FROM pg_indexes i
         LEFT JOIN pg_constraint c ON c.conindid = (quote_ident(i.indexname))::regclass
                                  AND c.conrelid = 'notification_messages'::regclass
        WHERE i.tablename = 'notification_messages' ORDER BY i.indexname`,
    )
  ).rows.map((r) => ({
    what: `index ${r.name}`,
    drop: r.conname
      ? `ALTER TABLE notification_messages DROP CONSTRAINT ${r.conname} CASCADE`
      : `DROP INDEX ${r.name}`,
  })),
  ...(
    await db.query(
      `SELECT conname AS name FROM pg_constraint WHERE conrelid = 'notification_messages'::regclass AND contype = 'f'`,
    )
  ).rows.map((r) => ({
    what: `foreign key ${r.name}`,
    drop: `ALTER TABLE notification_messages DROP CONSTRAINT ${r.name}`,
  })),
];
for (const part of parts) {
  await db.query('BEGIN');
  try {
    await db.query(part.drop);
    const without = await perMessage();
    console.log(
      `bench/notification-storing: without ${part.what}: storing one message ${without.message.toFixed(0)} µs and ${without.wal.toFixed(0)} B of WAL ` +
        `— the part: ${(all.message - without.message).toFixed(0)} µs, ${(all.wal - without.wal).toFixed(0)} B`,
    );
  } finally {
    await db.query('ROLLBACK');
  }
}
await Promise.all(sessions.map((session) => session.end()));
await database.drop();
