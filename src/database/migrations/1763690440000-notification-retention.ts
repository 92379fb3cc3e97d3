import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Settled notification messages (delivered, or failed for good) leave after
 * NOTIFICATION_RETENTION_DAYS with their attempts (docs/notifications.md, "Retention"). The pruning
 * finds the oldest of them through this index, never by reading the pending ones or the whole table.
 */
export class NotificationRetention1763690440000 implements MigrationInterface {
  name = 'NotificationRetention1763690440000';

  async up(db: QueryRunner): Promise<void> {
    await db.query(
      `CREATE INDEX notification_messages_settled ON notification_messages (created_at) WHERE status <> 'pending'`,
    );
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(`DROP INDEX notification_messages_settled`);
  }
}
