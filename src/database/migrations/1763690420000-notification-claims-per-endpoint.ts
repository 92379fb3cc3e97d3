import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Notifications keep pace with the ingress (docs/notifications.md, "Delivery model"): every row a
 * message writes is paid for on the same cores as the ingress, so it writes fewer.
 *
 * - A claim leases the endpoint only (`held_until`, taken under its row lock): one dispatcher at a
 *   time sends to an endpoint, so its messages need no lease of their own. `leased_until` goes, and
 *   with it the claim's update of every message it took (a new row version in each of its indexes).
 * - The messages list reads the endpoint's messages in event order through the (endpoint, event)
 *   index the table already has, so its own index on (endpoint, created_at, id) goes.
 * - "Is an earlier message of this run pending?" concerns run events only: delivery events (half of
 *   what the ingress makes) no longer enter that index.
 * - The outbox is a queue (every row inserted once and deleted once): vacuumed after every few
 *   thousand deletions rather than after a fifth of the table, so a burst leaves no trail of dead rows
 *   for the next look to step over. Messages are analysed as often, so that plans follow their growth.
 */
export class NotificationClaimsPerEndpoint1763690420000 implements MigrationInterface {
  name = 'NotificationClaimsPerEndpoint1763690420000';

  async up(db: QueryRunner): Promise<void> {
    await db.query(`ALTER TABLE notification_messages DROP COLUMN leased_until`);
    await db.query(`DROP INDEX notification_messages_endpoint`);
    await db.query(`DROP INDEX notification_messages_run_order`);
    await db.query(
      `CREATE INDEX notification_messages_run_order ON notification_messages (endpoint_id, run_id, event_id)
        WHERE status = 'pending' AND run_id IS NOT NULL`,
    );
    await db.query(
      `ALTER TABLE notification_outbox SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000,
                                            autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 5000)`,
    );
    await db.query(
      `ALTER TABLE notification_messages SET (autovacuum_analyze_scale_factor = 0.02, autovacuum_vacuum_scale_factor = 0.05)`,
    );
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(
      `ALTER TABLE notification_messages RESET (autovacuum_analyze_scale_factor, autovacuum_vacuum_scale_factor)`,
    );
    await db.query(
      `ALTER TABLE notification_outbox RESET (autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold,
                                              autovacuum_vacuum_insert_scale_factor, autovacuum_vacuum_insert_threshold)`,
    );
    await db.query(`DROP INDEX notification_messages_run_order`);
    await db.query(
      `CREATE INDEX notification_messages_run_order ON notification_messages (endpoint_id, run_id, event_id) WHERE status = 'pending'`,
    );
    await db.query(
      `CREATE INDEX notification_messages_endpoint ON notification_messages (endpoint_id, created_at DESC, id DESC)`,
    );
    await db.query(`ALTER TABLE notification_messages ADD COLUMN leased_until timestamptz`);
  }
}
