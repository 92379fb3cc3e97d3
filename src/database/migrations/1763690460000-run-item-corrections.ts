import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Stored runs made to read as a run created now does (docs/run-api.md, "One run"):
 * - `schedule` only on a run a schedule fired (`source` SCHEDULED_AGENT). RunItemFields gave one to
 *   every run whose metadata named a schedule of its team, whatever started it; a caller may put any
 *   `schedule_id` in a run's metadata, and a run no schedule fired has none.
 * - `agent_config.skill_spec` (and the `skill_spec` column the list filters, sorts and searches by)
 *   on a run created with `config.skills` only: its first entry, as a run created now takes it, for the
 *   clients that read a run's skill there. The run's `q` search text gains it too.
 * - A pull request artifact's `status`, which the newest TypeScript client requires: `unknown`, as
 *   for a harness that reports none (no harness reported one before).
 * Each step changes only rows it has not changed yet, so running it again changes nothing.
 */
export class RunItemCorrections1763690460000 implements MigrationInterface {
  name = 'RunItemCorrections1763690460000';

  async up(db: QueryRunner): Promise<void> {
    await db.query(
      `UPDATE runs SET schedule = NULL WHERE schedule IS NOT NULL AND source <> 'SCHEDULED_AGENT'`,
    );
    await db.query(`
      UPDATE runs
         SET agent_config = jsonb_set(agent_config, '{skill_spec}', agent_config->'skills'->0),
             skill_spec = coalesce(skill_spec, agent_config->'skills'->>0),
             search_text = CASE WHEN skill_spec IS NULL THEN search_text || ' ' || (agent_config->'skills'->>0)
                                ELSE search_text END
       WHERE agent_config->>'skill_spec' IS NULL
         AND jsonb_typeof(agent_config->'skills'->0) = 'string'`);
    await db.query(`
      UPDATE run_artifacts SET data = data || '{"status": "unknown"}'
       WHERE artifact_type = 'PULL_REQUEST' AND NOT data ? 'status'`);
  }

  async down(): Promise<void> {
    // Corrections of stored data: the earlier values were wrong or missing, so nothing is put back.
  }
}
