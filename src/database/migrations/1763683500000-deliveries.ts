import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The webhook delivery log and the shared rate-limit store. A unique index on (webhook, identity)
 * among accepted deliveries makes duplicate detection race-free across replicas.
 */
export class Deliveries1763683500000 implements MigrationInterface {
  name = 'Deliveries1763683500000';

  async up(db: QueryRunner): Promise<void> {
    await db.query(`
      CREATE TABLE deliveries (
        id              uuid PRIMARY KEY,
        webhook_id      uuid NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,
        status          text NOT NULL CHECK (status IN ('accepted', 'duplicate', 'rejected_auth',
                                                          'rejected_invalid_json', 'rejected_too_large')),
        identity        text,
        size_bytes      bigint,
        received_at     timestamptz NOT NULL,
        client_address  text,
        headers         jsonb NOT NULL DEFAULT '{}',
        payload         text
      )`);
    await db.query(
      `CREATE UNIQUE INDEX deliveries_accepted_identity ON deliveries (webhook_id, identity) WHERE status = 'accepted'`,
    );
    await db.query(
      `CREATE INDEX deliveries_webhook_received ON deliveries (webhook_id, received_at DESC, id DESC)`,
    );
    // "The runs a delivery started": webhook runs name their delivery log entry in their metadata.
    await db.query(
      `CREATE INDEX runs_webhook_delivery ON runs ((metadata->>'webhook_delivery_entry')) WHERE source = 'WEBHOOK'`,
    );
    // rate-limiter-flexible's PostgreSQL store (its own layout; created here, never by the library).
    // UNLOGGED: every delivery updates its webhook's counter row, and a WAL flush per update would
    // serialise the ingress on fsync; after a database crash the counters start from zero.
    await db.query(`
      CREATE UNLOGGED TABLE rate_limits (
        key     varchar(255) PRIMARY KEY,
        points  integer NOT NULL DEFAULT 0,
        expire  bigint
      )`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(`DROP TABLE IF EXISTS rate_limits`);
    await db.query(`DROP INDEX IF EXISTS runs_webhook_delivery`);
    await db.query(`DROP TABLE IF EXISTS deliveries`);
  }
}
