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
    // state has one (a question, an end's reason).
    await db.query(`
      CREATE FUNCTION record_run_transition() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        INSERT INTO run_transitions (run_id, team_id, previous_state, state, execution, worker_id, status_message, at)
        VALUES (NEW.id, NEW.team_id, CASE WHEN TG_OP = 'UPDATE' THEN OLD.state END, NEW.state, NEW.execution,
                CASE WHEN NEW.state IN ('CLAIMED', 'INPROGRESS', 'BLOCKED') THEN NEW.lease_owner END,
                CASE WHEN NEW.state NOT IN ('CLAIMED', 'INPROGRESS') THEN NEW.status_message END,
                NEW.updated_at);
        RETURN NULL;
      END $$`);
    await db.query(`
      CREATE TRIGGER runs_record_insert AFTER INSERT ON runs
        FOR EACH ROW EXECUTE FUNCTION record_run_transition()`);
    await db.query(`
      CREATE TRIGGER runs_record_transition AFTER UPDATE OF state ON runs
        FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state) EXECUTE FUNCTION record_run_transition()`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(`DROP TRIGGER runs_record_transition ON runs`);
    await db.query(`DROP TRIGGER runs_record_insert ON runs`);
    await db.query(`DROP FUNCTION record_run_transition()`);
    await db.query(`DROP TABLE run_transitions`);
  }
}
