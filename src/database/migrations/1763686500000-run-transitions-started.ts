import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A run that starts and ends in one statement still shows that it started. A fast harness's first
 * report can carry both its start and its result, which the worker applies as one transition along a
 * path (CLAIMED → INPROGRESS → SUCCEEDED) in one UPDATE; the statement trigger sees only its ends. When
 * a run leaves CLAIMED for anything but INPROGRESS or QUEUED with a new `started_at`, the timeline gets
 * the INPROGRESS it passed through (at `started_at`, by the worker that held it) before the end.
 */
export class RunTransitionsStarted1763686500000 implements MigrationInterface {
  name = 'RunTransitionsStarted1763686500000';

  async up(db: QueryRunner): Promise<void> {
    await db.query(`
      CREATE OR REPLACE FUNCTION record_run_transitions() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF TG_OP = 'INSERT' THEN
          INSERT INTO run_transitions (run_id, team_id, previous_state, state, execution, worker_id, status_message, at)
          SELECT n.id, n.team_id, NULL, n.state, n.execution, NULL, n.status_message, n.updated_at FROM new_runs n;
        ELSE
          INSERT INTO run_transitions (run_id, team_id, previous_state, state, execution, worker_id, status_message, at)
          SELECT run_id, team_id, previous_state, state, execution, worker_id, status_message, at FROM (
            SELECT n.id AS run_id, n.team_id, o.state AS previous_state, 'INPROGRESS' AS state, n.execution,
                   o.lease_owner AS worker_id, NULL::jsonb AS status_message, n.started_at AS at, 0 AS step
              FROM new_runs n JOIN old_runs o ON o.id = n.id
             WHERE o.state = 'CLAIMED' AND n.state NOT IN ('CLAIMED', 'INPROGRESS', 'QUEUED')
               AND n.started_at IS NOT NULL AND n.started_at IS DISTINCT FROM o.started_at
            UNION ALL
            SELECT n.id, n.team_id,
                   CASE WHEN o.state = 'CLAIMED' AND n.state NOT IN ('CLAIMED', 'INPROGRESS', 'QUEUED')
                         AND n.started_at IS NOT NULL AND n.started_at IS DISTINCT FROM o.started_at
                        THEN 'INPROGRESS' ELSE o.state END,
                   n.state, n.execution,
                   CASE WHEN n.state IN ('CLAIMED', 'INPROGRESS', 'BLOCKED') THEN n.lease_owner END,
                   CASE WHEN n.state NOT IN ('CLAIMED', 'INPROGRESS') THEN n.status_message END,
                   n.updated_at, 1
              FROM new_runs n JOIN old_runs o ON o.id = n.id
             WHERE o.state IS DISTINCT FROM n.state
          ) changes
          ORDER BY run_id, step;
        END IF;
        RETURN NULL;
      END $$`);
  }

  async down(): Promise<void> {
    // The earlier function is the previous migration's; going down past this one keeps this body.
  }
}
