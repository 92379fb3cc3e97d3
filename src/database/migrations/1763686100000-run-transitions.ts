import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Every state a run enters, with when and who (the worker holding it) and why (its status message):
 * the run timeline and the live streams read it. Written by a trigger on `runs`, so every writer
 * (RunsRepository's insert and transition, the queue's claim, the reaper) records its change in the
 * same statement that makes it, and none can forget. Its id orders a run's changes (the run's row
 * lock serialises them) and is the streams' event id.
 */
export class RunTransitions1763686100000 implements MigrationInterface {
  name = 'RunTransitions1763686100000';

  async up(db: QueryRunner): Promise<void> {
    await db.query(`
      CREATE TABLE run_transitions (
        id              bigserial PRIMARY KEY,
        run_id          uuid NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        team_id         uuid NOT NULL,
        previous_state  text,
        state           text NOT NULL,
        execution       integer NOT NULL,
        worker_id       text,
        status_message  jsonb,
        at              timestamptz NOT NULL
      )`);
    await db.query(`CREATE INDEX run_transitions_run ON run_transitions (run_id, id)`);
    await db.query(`CREATE INDEX run_transitions_team ON run_transitions (team_id, id)`);
    // One row per state change; the worker only while one holds the run, the message only where the
    // state has one (a question, an end's reason). Statement-level with transition tables: one
    // INSERT … SELECT per statement, so a batch (an ingress group commit, a claim) pays once, not per
    // row (measured: an insert's overhead fell from about 70 to 15 µs a run).
    await db.query(`
      CREATE FUNCTION record_run_transitions() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF TG_OP = 'INSERT' THEN
          INSERT INTO run_transitions (run_id, team_id, previous_state, state, execution, worker_id, status_message, at)
          SELECT n.id, n.team_id, NULL, n.state, n.execution, NULL, n.status_message, n.updated_at FROM new_runs n;
        ELSE
          INSERT INTO run_transitions (run_id, team_id, previous_state, state, execution, worker_id, status_message, at)
          SELECT n.id, n.team_id, o.state, n.state, n.execution,
                 CASE WHEN n.state IN ('CLAIMED', 'INPROGRESS', 'BLOCKED') THEN n.lease_owner END,
                 CASE WHEN n.state NOT IN ('CLAIMED', 'INPROGRESS') THEN n.status_message END,
                 n.updated_at
            FROM new_runs n JOIN old_runs o ON o.id = n.id
           WHERE o.state IS DISTINCT FROM n.state
           ORDER BY n.id;
        END IF;
        RETURN NULL;
      END $$`);
    await db.query(`
      CREATE TRIGGER runs_record_insert AFTER INSERT ON runs REFERENCING NEW TABLE AS new_runs
        FOR EACH STATEMENT EXECUTE FUNCTION record_run_transitions()`);
    // Transition tables allow no column list (UPDATE OF state): every UPDATE of runs fires it, and
    // those that change no state (a lease renewal) insert nothing.
    await db.query(`
      CREATE TRIGGER runs_record_transition AFTER UPDATE ON runs REFERENCING OLD TABLE AS old_runs NEW TABLE AS new_runs
        FOR EACH STATEMENT EXECUTE FUNCTION record_run_transitions()`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(`DROP TRIGGER runs_record_transition ON runs`);
    await db.query(`DROP TRIGGER runs_record_insert ON runs`);
    await db.query(`DROP FUNCTION record_run_transitions()`);
    await db.query(`DROP TABLE run_transitions`);
  }
}
