import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * What real harnesses report beyond the conversation: the tokens each model used in a run (one row
 * per run and model, summed over its executions: `usage` events), and an interrupt asked for and
 * not yet handed to the run's worker (the execution it was asked for, so a later one never gets it).
 */
export class HarnessUsage1763688700000 implements MigrationInterface {
  name = 'HarnessUsage1763688700000';

  async up(db: QueryRunner): Promise<void> {
    await db.query(`
      CREATE TABLE run_token_usage (
        run_id              uuid NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        model_id            text NOT NULL,
        input_tokens        bigint NOT NULL,
        output_tokens       bigint NOT NULL,
        cache_read_tokens   bigint,
        cache_write_tokens  bigint,
        reports             integer NOT NULL,
        last_execution      integer NOT NULL,
        updated_at          timestamptz NOT NULL,
        PRIMARY KEY (run_id, model_id)
      )`);
    await db.query(`ALTER TABLE runs ADD COLUMN interrupt_execution integer`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(`ALTER TABLE runs DROP COLUMN interrupt_execution`);
    await db.query(`DROP TABLE IF EXISTS run_token_usage`);
  }
}
