import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A run's artifacts have one home, `run_artifacts` (docs/workers.md, "Artifacts"): the run item's
 * `artifacts` is read from it, so `runs.artifacts`, which every report wrote a second time, goes.
 *
 * - `position` keeps the order a report gave its artifacts (they share one `created_at`; ids are
 *   random), as the list in `runs.artifacts` did.
 * - The list's `artifact_type` filter finds the team's runs that left one through
 *   `run_artifacts_team_type` (at 1M runs, a type no run left: 0.1 ms, where the filter on
 *   `runs.artifacts` walked every run of the team).
 * - Entries of `runs.artifacts` with no row (the older `artifact` action's input, stored as given)
 *   move into `run_artifacts` where they can be one: an entry in the clients' ArtifactItem shape (one
 *   of the five `artifact_type`s and a `data` object) with its data, and the example harness's former
 *   `{type: 'file', name, content}` as a FILE with its text. Any other shape never was an ArtifactItem
 *   the clients could read, and is dropped.
 */
export class ArtifactsOneHome1763690450000 implements MigrationInterface {
  name = 'ArtifactsOneHome1763690450000';

  async up(db: QueryRunner): Promise<void> {
    await db.query(`ALTER TABLE run_artifacts ADD COLUMN position integer NOT NULL DEFAULT 0`);
    await db.query(`
      WITH entries AS (
        SELECT r.id AS run_id, r.team_id, r.execution, r.updated_at, e.item, e.ord
          FROM runs r, jsonb_array_elements(r.artifacts) WITH ORDINALITY AS e(item, ord)
         WHERE jsonb_typeof(r.artifacts) = 'array'
      ),
      stored AS (
        UPDATE run_artifacts a SET position = e.ord FROM entries e
         WHERE e.run_id = a.run_id AND e.item->'data'->>'artifact_uid' = a.id::text
        RETURNING a.id
      ),
      loose AS (
        SELECT e.* FROM entries e
         WHERE NOT EXISTS (SELECT 1 FROM run_artifacts a
                            WHERE a.run_id = e.run_id AND a.id::text = e.item->'data'->>'artifact_uid')
      )
      INSERT INTO run_artifacts (id, run_id, team_id, execution, artifact_type, data, content_type, content, position, created_at)
      SELECT gen_random_uuid(), run_id, team_id, execution, item->>'artifact_type',
             (item->'data') - 'artifact_uid' - 'document_uid' - 'notebook_uid', NULL, NULL, ord, updated_at
        FROM loose
       WHERE item->>'artifact_type' IN ('PLAN', 'PULL_REQUEST', 'SCREENSHOT', 'FILE', 'EXTERNAL_REFERENCE')
         AND jsonb_typeof(item->'data') = 'object'
      UNION ALL
      SELECT gen_random_uuid(), run_id, team_id, execution, 'FILE',
             jsonb_build_object('filename', item->>'name', 'filepath', item->>'name', 'mime_type', 'text/plain',
                                'size_bytes', octet_length(convert_to(item->>'content', 'UTF8'))),
             'text/plain', convert_to(item->>'content', 'UTF8'), ord, updated_at
        FROM loose
       WHERE item->>'type' = 'file' AND jsonb_typeof(item->'name') = 'string'
         AND jsonb_typeof(item->'content') = 'string'`);
    await db.query(`ALTER TABLE runs DROP COLUMN artifacts`);
    await db.query(`CREATE INDEX run_artifacts_team_type ON run_artifacts (team_id, artifact_type, run_id)`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(`DROP INDEX run_artifacts_team_type`);
    await db.query(`ALTER TABLE runs ADD COLUMN artifacts jsonb`);
    await db.query(`ALTER TABLE run_artifacts DROP COLUMN position`);
  }
}
