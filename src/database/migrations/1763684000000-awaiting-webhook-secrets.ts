import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Webhooks created (disabled) through the management API before their provider issued the signing
 * secret: setting the secret enables them. Management state beside the definition, not part of it.
 */
export class AwaitingWebhookSecrets1763684000000 implements MigrationInterface {
  name = 'AwaitingWebhookSecrets1763684000000';

  async up(db: QueryRunner): Promise<void> {
    await db.query(`
      CREATE TABLE webhooks_awaiting_secret (
        webhook_id  uuid PRIMARY KEY REFERENCES webhooks(id) ON DELETE CASCADE,
        created_at  timestamptz NOT NULL DEFAULT now()
      )`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(`DROP TABLE IF EXISTS webhooks_awaiting_secret`);
  }
}
