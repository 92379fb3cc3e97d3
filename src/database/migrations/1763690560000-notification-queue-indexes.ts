import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Each question a claim asks of an endpoint's pending messages gets an index that answers it from
 * the endpoint's own entries, and that no other question can take (docs/notifications.md, "Bounds").
 *
 * - A failing endpoint's oldest pending message (it goes first, alone) had no index of its own:
 *   PostgreSQL read all of the endpoint's pending messages and sorted them, or its delivered history
 *   before them — on every claim of every team, while such an endpoint looked ready (measured: claims
 *   of 20–45 ms instead of 4–5 beside a 5xx endpoint's backlog of 35,000). Now one entry of
 *   `notification_messages_endpoint_queue`: its pending messages in event order.
 * - "Is an earlier message of this run still pending?" is asked once per message a claim takes, and
 *   only the run-order index answers it from that run's entries. But with statistics that took the
 *   pending-message indexes for empty, the planner answered it from another one — all of the
 *   endpoint's pending messages, for each message taken: 45,000 rows for a claim of 300. The run-order
 *   index now says "pending" as "neither delivered nor failed", as the claim asks it, which no other
 *   index's "pending" matches, so no other index can be used for it.
 */
export class NotificationQueueIndexes1763690560000 implements MigrationInterface {
  name = 'NotificationQueueIndexes1763690560000';

  async up(db: QueryRunner): Promise<void> {
    await db.query(
      `CREATE INDEX notification_messages_endpoint_queue ON notification_messages (endpoint_id, event_id)
        WHERE status = 'pending'`,
    );
    await this.runOrder(db, `status <> 'delivered' AND status <> 'failed'`);
  }

  async down(db: QueryRunner): Promise<void> {
    await this.runOrder(db, `status = 'pending'`);
    await db.query(`DROP INDEX notification_messages_endpoint_queue`);
  }

  private async runOrder(db: QueryRunner, pending: string): Promise<void> {
    await db.query(`DROP INDEX notification_messages_run_order`);
    await db.query(
      `CREATE INDEX notification_messages_run_order ON notification_messages (endpoint_id, run_id, event_id)
        WHERE ${pending} AND run_id IS NOT NULL`,
    );
  }
}
