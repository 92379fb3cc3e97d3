import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Fair service-hosted slots: a team's own cap (NULL: the environment's default), each worker's slot
 * count in the registry (the total across replicas), and the queue indexed by team so that a claim
 * reads the oldest queued runs of each team instead of the oldest overall.
 */
export class FairSlots1763684310000 implements MigrationInterface {
  name = 'FairSlots1763684310000';

  async up(db: QueryRunner): Promise<void> {
    await db.query(`ALTER TABLE teams ADD COLUMN max_slots integer CHECK (max_slots >= 1)`);
    await db.query(`ALTER TABLE workers ADD COLUMN slots integer NOT NULL DEFAULT 0`);
    // Replaces runs_queue (worker_host, created_at): every claim now looks at one team at a time.
    await db.query(
      `CREATE INDEX runs_queue_team ON runs (worker_host, team_id, created_at) WHERE state = 'QUEUED'`,
    );
    await db.query(`DROP INDEX runs_queue`);
    // What each team holds, counted per team by the claim.
    await db.query(
      `CREATE INDEX runs_held_team ON runs (worker_host, team_id) WHERE state IN ('CLAIMED', 'INPROGRESS', 'BLOCKED')`,
    );
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(`CREATE INDEX runs_queue ON runs (worker_host, created_at) WHERE state = 'QUEUED'`);
    await db.query(`DROP INDEX runs_queue_team`);
    await db.query(`DROP INDEX runs_held_team`);
    await db.query(`ALTER TABLE workers DROP COLUMN slots`);
    await db.query(`ALTER TABLE teams DROP COLUMN max_slots`);
  }
}
