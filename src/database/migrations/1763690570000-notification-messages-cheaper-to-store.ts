import type { MigrationInterface, QueryRunner } from 'typeorm';
import { redefineFunction } from './redefine-function.js';

/**
 * Storing a message gets cheaper: what every subscribed endpoint, answering or not, adds to its
 * team's state changes, on cores every team shares (docs/notifications.md, "Bounds").
 *
 * - **No foreign key to the endpoint.** Its check locked the endpoint's row (KEY SHARE) in every
 *   state change that made a message: a lock record in the WAL, and, since each of a team's
 *   transactions in flight held it at once while dispatchers updated the row, a multixact — work
 *   on PostgreSQL's shared multixact caches, which every team uses. What the key guaranteed is
 *   kept otherwise. Deleting endpoints (by the API, a factory apply, a factory's or team's
 *   deletion) deletes their messages in the same statement (a trigger); and a state change takes
 *   its team's advisory lock, shared, before it reads the team's endpoints, while a deletion takes
 *   it exclusively before deleting their messages: a state change in flight when an endpoint goes
 *   has committed its messages before they are deleted, and one after reads the endpoint gone (its
 *   statement's snapshot is taken after the lock). A lock held shared writes nothing.
 * - **Time-ordered message ids** (the UUIDv7 layout: milliseconds, then random bits) instead of
 *   random ones: a new id goes at the end of the primary key's index, not on a random page of it.
 *
 * Both measured by `npm run bench -- notification-storing`.
 */
const LOCK_KEY = (team: string) => `hashtextextended('factoryd:notification-endpoints:' || ${team}, 0)`;

/** The statement notification_messages_of runs first: its events' teams locked, shared, in one order. */
const TEAMS_LOCKED = `PERFORM pg_advisory_xact_lock_shared(${LOCK_KEY('t.team_id')})
     FROM (SELECT DISTINCT team_id FROM jsonb_to_recordset(events) AS ev(team_id uuid) ORDER BY 1) t; `;

/** notification_messages_of with its body changed by `change`; refuses a body it does not change. */
const redefineMessagesOf = (db: QueryRunner, change: (body: string) => string) =>
  redefineFunction(db, 'notification_messages_of(events jsonb)', 'void', 'plpgsql', (body) => {
    const changed = change(body);
    if (changed === body)
      throw new Error('notification_messages_of is not the function this migration expects');
    return changed;
  });

export class NotificationMessagesCheaperToStore1763690570000 implements MigrationInterface {
  name = 'NotificationMessagesCheaperToStore1763690570000';

  async up(db: QueryRunner): Promise<void> {
    await db.query(`
      CREATE FUNCTION notification_message_id() RETURNS uuid LANGUAGE sql VOLATILE AS $$
        SELECT encode(set_bit(set_bit(
                 overlay(uuid_send(gen_random_uuid())
                         PLACING substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
                         FROM 1 FOR 6),
                 52, 1), 53, 1), 'hex')::uuid
      $$`);
    await db.query(`ALTER TABLE notification_messages ALTER COLUMN id SET DEFAULT notification_message_id()`);
    await db.query(
      `ALTER TABLE notification_messages DROP CONSTRAINT notification_messages_endpoint_id_fkey`,
    );
    await redefineMessagesOf(db, (body) => body.replace(/^BEGIN /, `BEGIN ${TEAMS_LOCKED}`));
    await db.query(`
      CREATE FUNCTION notification_endpoints_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        PERFORM pg_advisory_xact_lock(${LOCK_KEY('t.team_id')})
           FROM (SELECT DISTINCT team_id FROM old_endpoints ORDER BY 1) t;
        DELETE FROM notification_messages m USING old_endpoints o WHERE m.endpoint_id = o.id;
        RETURN NULL;
      END $$`);
    await db.query(`
      CREATE TRIGGER notification_endpoints_deleted AFTER DELETE ON notification_endpoints
        REFERENCING OLD TABLE AS old_endpoints FOR EACH STATEMENT EXECUTE FUNCTION notification_endpoints_deleted()`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(`DROP TRIGGER notification_endpoints_deleted ON notification_endpoints`);
    await db.query(`DROP FUNCTION notification_endpoints_deleted()`);
    await redefineMessagesOf(db, (body) => body.replace(TEAMS_LOCKED, ''));
    await db.query(
      `DELETE FROM notification_messages m WHERE NOT EXISTS (SELECT 1 FROM notification_endpoints e WHERE e.id = m.endpoint_id)`,
    );
    await db.query(`
      ALTER TABLE notification_messages ADD CONSTRAINT notification_messages_endpoint_id_fkey
        FOREIGN KEY (endpoint_id) REFERENCES notification_endpoints(id) ON DELETE CASCADE`);
    await db.query(`ALTER TABLE notification_messages ALTER COLUMN id SET DEFAULT gen_random_uuid()`);
    await db.query(`DROP FUNCTION notification_message_id()`);
  }
}
