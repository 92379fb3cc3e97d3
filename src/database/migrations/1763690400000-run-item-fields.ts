import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * What the clients' newest RunItem carries that a run did not keep:
 * - `factory_uid`: the factory whose agent executed the run (its foreman on a dispatch, the agent of
 *   its automation or schedule, a named agent of it or linked to it). Set by the code that starts the
 *   run, never from the caller's metadata; the `factory_uid` filter reads it. Runs from before kept
 *   the factory only as the `metadata.factory_uid` stamp, which they take here.
 * - `root_run_id`: the top of a child run's `parent_run_id` chain (NULL for a top-level run, whose
 *   root is itself), so reading a run never walks the chain.
 * - `schedule`: the schedule that fired the run, as it was then (`schedule_id, schedule_name,
 *   cron_schedule`). Runs from before take their schedule as it is now.
 * And the index `GET /agent/run-by-external-reference` finds an external reference's run by.
 */
export class RunItemFields1763690400000 implements MigrationInterface {
  name = 'RunItemFields1763690400000';

  async up(db: QueryRunner): Promise<void> {
    await db.query(
      `ALTER TABLE runs ADD COLUMN factory_uid text, ADD COLUMN root_run_id uuid, ADD COLUMN schedule jsonb`,
    );
    await db.query(`UPDATE runs SET factory_uid = metadata->>'factory_uid' WHERE metadata ? 'factory_uid'`);
    await db.query(`
      WITH RECURSIVE chain(id, root) AS (
        SELECT c.id, c.parent_run_id FROM runs c
          JOIN runs p ON p.id = c.parent_run_id AND p.parent_run_id IS NULL
        UNION ALL
        SELECT c.id, chain.root FROM runs c JOIN chain ON c.parent_run_id = chain.id
      )
      UPDATE runs r SET root_run_id = chain.root FROM chain WHERE r.id = chain.id`);
    await db.query(`
      UPDATE runs r SET schedule = jsonb_build_object('schedule_id', s.id, 'schedule_name', s.name,
                                                      'cron_schedule', s.cron_schedule)
        FROM schedules s
       WHERE r.metadata @> jsonb_build_object('schedule_id', s.id::text) AND r.team_id = s.team_id`);
    // Partial: only runs of a factory pay for it on insert.
    await db.query(
      `CREATE INDEX runs_team_factory ON runs (team_id, factory_uid) WHERE factory_uid IS NOT NULL`,
    );
    await db.query(
      `CREATE INDEX run_artifacts_external_url ON run_artifacts (team_id, (data->>'url'))
        WHERE artifact_type = 'EXTERNAL_REFERENCE'`,
    );
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(`DROP INDEX run_artifacts_external_url`);
    await db.query(`DROP INDEX runs_team_factory`);
    await db.query(`ALTER TABLE runs DROP COLUMN factory_uid, DROP COLUMN root_run_id, DROP COLUMN schedule`);
  }
}
