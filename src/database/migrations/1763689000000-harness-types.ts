import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Built-in harnesses (docs/harnesses.md): a team's default harness type (NULL: its harness command,
 * `oz`), and the harnesses each worker can run with their CLIs' versions (NULL: an older worker, `oz`).
 */
export class HarnessTypes1763689000000 implements MigrationInterface {
  name = 'HarnessTypes1763689000000';

  async up(db: QueryRunner): Promise<void> {
    await db.query(`ALTER TABLE teams ADD COLUMN harness_type text`);
    await db.query(`ALTER TABLE workers ADD COLUMN harnesses jsonb`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(`ALTER TABLE workers DROP COLUMN harnesses`);
    await db.query(`ALTER TABLE teams DROP COLUMN harness_type`);
  }
}
