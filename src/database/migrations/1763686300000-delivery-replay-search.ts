import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Replay and search of the delivery log (docs/webhooks.md "Replay", "Searching the delivery log").
 * Written to be safe on a big `deliveries` table, so it runs outside a transaction, statement by
 * statement: the new column is nullable without a default (no rewrite), the foreign key and the
 * status check are added NOT VALID (no scan under an exclusive lock) and validated afterwards under
 * a lock that lets the ingress write, and the indexes are built CONCURRENTLY.
 */
export class DeliveryReplaySearch1763686300000 implements MigrationInterface {
  name = 'DeliveryReplaySearch1763686300000';
  transaction = false;

  async up(db: QueryRunner): Promise<void> {
    await db.query(`ALTER TABLE deliveries ADD COLUMN IF NOT EXISTS replay_of uuid`);
    await db.query(`ALTER TABLE deliveries DROP CONSTRAINT IF EXISTS deliveries_replay_of_fkey`);
    await db.query(
      `ALTER TABLE deliveries ADD CONSTRAINT deliveries_replay_of_fkey FOREIGN KEY (replay_of)
         REFERENCES deliveries(id) ON DELETE SET NULL NOT VALID`,
    );
    await db.query(`ALTER TABLE deliveries DROP CONSTRAINT IF EXISTS deliveries_status_check`);
    await db.query(
      `ALTER TABLE deliveries ADD CONSTRAINT deliveries_status_check CHECK (status IN ('accepted', 'duplicate',
         'rejected_auth', 'rejected_invalid_json', 'rejected_too_large', 'replayed')) NOT VALID`,
    );
    await db.query(`ALTER TABLE deliveries VALIDATE CONSTRAINT deliveries_status_check`);
    // "The replays of an entry", and the foreign key's ON DELETE when retention prunes.
    await createIndexConcurrently(
      db,
      'deliveries_replay_of',
      `ON deliveries (replay_of) WHERE replay_of IS NOT NULL`,
    );
    await db.query(`ALTER TABLE deliveries VALIDATE CONSTRAINT deliveries_replay_of_fkey`);
    // The payload is stored as the exact text received; jsonb refuses some valid JSON (\u0000, lone
    // surrogates). This is the payload as jsonb under its webhook's id as the one key, or NULL when
    // jsonb cannot hold it, so that neither the index below nor an insert ever fails on such a body
    // (it is just not searchable). The webhook key makes every jsonb_path_ops entry (a hash of the
    // whole path) per webhook: a value common in other webhooks' payloads costs this one nothing.
    await db.query(`
      CREATE OR REPLACE FUNCTION delivery_search_json(webhook_id uuid, payload text) RETURNS jsonb
        LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
      BEGIN
        RETURN jsonb_build_object(webhook_id::text, payload::jsonb);
      EXCEPTION WHEN invalid_text_representation OR untranslatable_character OR program_limit_exceeded THEN
        RETURN NULL;
      END $$`);
    // payload_contains: `@>` with jsonb_path_ops (smaller and faster than the default opclass for
    // containment, which is the only operator searched).
    await createIndexConcurrently(
      db,
      'deliveries_payload_search',
      `ON deliveries USING gin (delivery_search_json(webhook_id, payload) jsonb_path_ops) WHERE payload IS NOT NULL`,
    );
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(`DROP INDEX CONCURRENTLY IF EXISTS deliveries_payload_search`);
    await db.query(`DROP FUNCTION IF EXISTS delivery_search_json(uuid, text)`);
    await db.query(`DROP INDEX CONCURRENTLY IF EXISTS deliveries_replay_of`);
    await db.query(`DELETE FROM deliveries WHERE status = 'replayed'`);
    await db.query(`ALTER TABLE deliveries DROP CONSTRAINT IF EXISTS deliveries_status_check`);
    await db.query(
      `ALTER TABLE deliveries ADD CONSTRAINT deliveries_status_check CHECK (status IN ('accepted', 'duplicate',
         'rejected_auth', 'rejected_invalid_json', 'rejected_too_large'))`,
    );
    await db.query(`ALTER TABLE deliveries DROP COLUMN IF EXISTS replay_of`);
  }
}

/** CREATE INDEX CONCURRENTLY, first dropping an invalid leftover of an interrupted earlier attempt. */
async function createIndexConcurrently(db: QueryRunner, name: string, definition: string): Promise<void> {
  const [leftover] = (await db.query(
    `SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
      WHERE c.relname = $1 AND NOT i.indisvalid`,
    [name],
  )) as unknown[];
  if (leftover) await db.query(`DROP INDEX CONCURRENTLY IF EXISTS ${name}`);
  await db.query(`CREATE INDEX CONCURRENTLY IF NOT EXISTS ${name} ${definition}`);
}
