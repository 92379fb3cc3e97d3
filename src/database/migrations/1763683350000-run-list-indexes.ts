import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * GET /agent/runs filters that had no index of their own walked a team's whole updated_at index when
 * they matched few or no runs (1M runs: model_id 145 ms, creator 330 ms). Each gets a per-team index
 * in the default order, which also lets the planner fetch a rare value's runs directly for the other
 * sorts.
 */
export class RunListIndexes1763683350000 implements MigrationInterface {
  name = 'RunListIndexes1763683350000';

  async up(db: QueryRunner): Promise<void> {
    for (const column of ['creator_id', 'model_id', 'environment_id', 'skill_spec']) {
      await db.query(
        `CREATE INDEX runs_team_${column}_updated ON runs (team_id, ${column}, updated_at DESC, id DESC)`,
      );
    }
  }

  async down(db: QueryRunner): Promise<void> {
    for (const column of ['creator_id', 'model_id', 'environment_id', 'skill_spec']) {
      await db.query(`DROP INDEX IF EXISTS runs_team_${column}_updated`);
    }
  }
}
