import type { MigrationInterface, QueryRunner } from 'typeorm';

/** A team's own harness command for the service-hosted workers (NULL: the environment's HARNESS_COMMAND). */
export class TeamHarness1763684100000 implements MigrationInterface {
  name = 'TeamHarness1763684100000';

  async up(db: QueryRunner): Promise<void> {
    await db.query(`ALTER TABLE teams ADD COLUMN harness_command text`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(`ALTER TABLE teams DROP COLUMN harness_command`);
  }
}
