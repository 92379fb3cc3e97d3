import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A dispatcher's record of an endpoint's attempts applies only under the claim that took them
 * (docs/notifications.md, "The delivery model"): `claim_id` names the claim holding the endpoint,
 * set with its lease (`held_until`) and cleared when the record releases it. A record so late that
 * the lease lapsed and another dispatcher claimed the endpoint finds another claim there, and changes
 * neither the endpoint nor its messages. The lease's time could not say so: a release may write the
 * very instant an earlier lease ended, and a resend or a re-enable moves `held_until` under a claim.
 */
export class NotificationEndpointClaim1763690470000 implements MigrationInterface {
  name = 'NotificationEndpointClaim1763690470000';

  async up(db: QueryRunner): Promise<void> {
    await db.query(`ALTER TABLE notification_endpoints ADD COLUMN claim_id uuid`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(`ALTER TABLE notification_endpoints DROP COLUMN claim_id`);
  }
}
