import type { MigrationInterface, QueryRunner } from 'typeorm';

/** Run execution: leases on runs, the conversation/transcript (run_events), worker heartbeats. */
export class Workers1763683600000 implements MigrationInterface {
  name = 'Workers1763683600000';

  async up(db: QueryRunner): Promise<void> {
    // lease_owner is the worker that holds the run; execution counts how often it was started
    // (a follow-up to an ended run starts a new execution in the same conversation).
    await db.query(`
      ALTER TABLE runs
        ADD COLUMN lease_owner       text,
        ADD COLUMN lease_expires_at  timestamptz,
        ADD COLUMN claimed_at        timestamptz,
        ADD COLUMN execution         integer NOT NULL DEFAULT 0`);
    // The claim query: oldest QUEUED run of a worker host.
    await db.query(`CREATE INDEX runs_queue ON runs (worker_host, created_at) WHERE state = 'QUEUED'`);
    // The reaper: held runs by lease expiry.
    await db.query(
      `CREATE INDEX runs_leases ON runs (lease_expires_at) WHERE state IN ('CLAIMED', 'INPROGRESS', 'BLOCKED')`,
    );
    await db.query(`
      CREATE TABLE run_events (
        id          bigserial PRIMARY KEY,
        run_id      uuid NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        team_id     uuid NOT NULL,
        execution   integer NOT NULL,
        type        text NOT NULL CHECK (type IN ('message', 'action', 'status', 'result', 'transcript')),
        role        text,
        kind        text,
        body        jsonb NOT NULL,
        created_at  timestamptz NOT NULL
      )`);
    await db.query(`CREATE INDEX run_events_run ON run_events (run_id, id)`);
    await db.query(
      `CREATE INDEX run_events_skill_loads ON run_events (team_id, created_at) WHERE type = 'action' AND kind = 'read_skill'`,
    );
    // One row per worker connection (a process); heartbeats keep last_seen_at fresh.
    await db.query(`
      CREATE TABLE workers (
        id            text PRIMARY KEY,
        worker_host   text NOT NULL,
        team_id       uuid REFERENCES teams(id) ON DELETE CASCADE,
        self_hosted   boolean NOT NULL,
        connected_at  timestamptz NOT NULL,
        last_seen_at  timestamptz NOT NULL
      )`);
    await db.query(`CREATE INDEX workers_host ON workers (team_id, worker_host, last_seen_at)`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(`DROP TABLE IF EXISTS workers`);
    await db.query(`DROP TABLE IF EXISTS run_events`);
    await db.query(`DROP INDEX IF EXISTS runs_queue`);
    await db.query(`DROP INDEX IF EXISTS runs_leases`);
    await db.query(
      `ALTER TABLE runs DROP COLUMN lease_owner, DROP COLUMN lease_expires_at, DROP COLUMN claimed_at, DROP COLUMN execution`,
    );
  }
}
