import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Per-endpoint pacing of notifications (docs/notifications.md, "A failing endpoint"). An endpoint
 * whose last attempt failed is `failing_since` that attempt, and is tried again one message at a time
 * (its oldest pending) when the message's retry is due; `held_until` says when the endpoint may next
 * be attempted: the retry of a failing endpoint, or the lease of the attempts one dispatcher has in
 * flight to it (one group of attempts per endpoint at a time, across replicas).
 *
 * Messages are claimed per endpoint now (endpoints that are not held, then each one's due messages),
 * so the due index leads with the endpoint: a failing endpoint's queue is never scanned while it is
 * held (its oldest message is looked for in it once per retry, the only time its queue is read). The
 * old time-only index served the previous claim alone; every message pays for each index, so there
 * is no other.
 */
export class NotificationEndpointPacing1763687000000 implements MigrationInterface {
  name = 'NotificationEndpointPacing1763687000000';

  async up(db: QueryRunner): Promise<void> {
    await db.query(`ALTER TABLE notification_endpoints ADD COLUMN failing_since timestamptz,
                                                      ADD COLUMN held_until timestamptz`);
    await db.query(
      `CREATE INDEX notification_messages_endpoint_due ON notification_messages (endpoint_id, next_attempt_at, event_id) WHERE status = 'pending'`,
    );
    await db.query(`DROP INDEX notification_messages_due`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(
      `CREATE INDEX notification_messages_due ON notification_messages (next_attempt_at) WHERE status = 'pending'`,
    );
    await db.query(`DROP INDEX notification_messages_endpoint_due`);
    await db.query(`ALTER TABLE notification_endpoints DROP COLUMN failing_since, DROP COLUMN held_until`);
  }
}
