import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Issue #32. `run_transcript_usage`: what each run's harness output has stored in `run_events` so far
 * (bytes and events, counted by the service), against the transcript budget; `last_kept` and
 * `last_noted` tell the statement that updated it what it may insert (RETURNING shows only the new
 * row). `transcript_fit`: how many of a report's events still fit. `team_slot_turns`: when each team
 * was last given a service-hosted slot (a sequence, not a clock), so that a freed slot goes to the
 * team served least recently, not to the oldest queued run.
 */
export class RunOutputBounds1763689100000 implements MigrationInterface {
  name = 'RunOutputBounds1763689100000';

  async up(db: QueryRunner): Promise<void> {
    await db.query(`
      CREATE TABLE run_transcript_usage (
        run_id      uuid PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
        bytes       bigint NOT NULL,
        events      integer NOT NULL,
        truncated   boolean NOT NULL,
        last_kept   integer NOT NULL,
        last_noted  boolean NOT NULL
      )`);
    // `upto`: the report's events' sizes summed from the first (so a prefix fits or not). Once a run
    // was truncated nothing more is kept: its conversation must not go on after the note.
    await db.query(`
      CREATE FUNCTION transcript_fit(used_bytes bigint, used_events integer, truncated boolean,
                                     upto bigint[], max_bytes bigint, max_events integer)
      RETURNS integer LANGUAGE sql IMMUTABLE AS $$
        SELECT CASE WHEN truncated THEN 0 ELSE
          (SELECT count(*)::int FROM unnest(upto) WITH ORDINALITY AS u(b, n)
            WHERE used_bytes + u.b <= max_bytes AND used_events + u.n <= max_events) END
      $$`);
    await db.query(`CREATE SEQUENCE team_slot_turn`);
    await db.query(`
      CREATE TABLE team_slot_turns (
        team_id  uuid PRIMARY KEY REFERENCES teams(id) ON DELETE CASCADE,
        served   bigint NOT NULL
      )`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(`DROP TABLE team_slot_turns`);
    await db.query(`DROP SEQUENCE team_slot_turn`);
    await db.query(`DROP FUNCTION transcript_fit`);
    await db.query(`DROP TABLE run_transcript_usage`);
  }
}
