import type { MigrationInterface, QueryRunner } from 'typeorm';

/** A team's queued runs, counted up to TEAM_MAX_QUEUED_RUNS before a run is created (team-queue-cap.ts). */
export class TeamQueueCap1763690400000 implements MigrationInterface {
  name = 'TeamQueueCap1763690400000';

  async up(db: QueryRunner): Promise<void> {
    await db.query(`CREATE INDEX runs_queued_team ON runs (team_id) WHERE state = 'QUEUED'`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(`DROP INDEX runs_queued_team`);
  }
}
