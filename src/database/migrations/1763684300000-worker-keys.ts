import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Worker keys: a key with the `workers` scope is bound to one worker_host and has no other scope, so a
 * machine's worker credential reads and writes nothing but that host's runs. Existing keys keep their
 * scopes (none has `workers`); a self-hosted worker started with one is refused with the command to issue
 * a worker key.
 */
export class WorkerKeys1763684300000 implements MigrationInterface {
  name = 'WorkerKeys1763684300000';

  async up(db: QueryRunner): Promise<void> {
    await db.query(`ALTER TABLE api_keys ADD COLUMN worker_host text`);
    await db.query(`
      ALTER TABLE api_keys ADD CONSTRAINT api_keys_worker_host CHECK (
        CASE WHEN 'workers' = ANY(scopes) THEN scopes = '{workers}' AND worker_host IS NOT NULL
             ELSE worker_host IS NULL END)`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(`DELETE FROM api_keys WHERE worker_host IS NOT NULL`);
    await db.query(`ALTER TABLE api_keys DROP CONSTRAINT api_keys_worker_host, DROP COLUMN worker_host`);
  }
}
