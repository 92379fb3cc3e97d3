import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `q` searches a run's `search_text` — its title, the prompt as its author wrote it and its skill —
 * instead of the whole prompt. A webhook run's prompt ends in an envelope factoryd writes (~330
 * characters, ~290 trigrams), the same boilerplate on every such run: indexing it was most of the
 * database's time per webhook delivery, and a search for "webhook" matched every webhook run.
 */
export class RunSearchText1763684200000 implements MigrationInterface {
  name = 'RunSearchText1763684200000';

  async up(db: QueryRunner): Promise<void> {
    await db.query(`ALTER TABLE runs ADD COLUMN search_text text`);
    // Runs from before keep what they were searched by.
    await db.query(`UPDATE runs SET search_text = title || ' ' || prompt || ' ' || coalesce(skill_spec, '')`);
    await db.query(`ALTER TABLE runs ALTER COLUMN search_text SET NOT NULL`);
    await db.query(`DROP INDEX IF EXISTS runs_search`);
    await db.query(`CREATE INDEX runs_search ON runs USING gin (search_text gin_trgm_ops)`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(`DROP INDEX IF EXISTS runs_search`);
    await db.query(`ALTER TABLE runs DROP COLUMN search_text`);
    await db.query(
      `CREATE INDEX runs_search ON runs USING gin ((title || ' ' || prompt || ' ' || coalesce(skill_spec, '')) gin_trgm_ops)`,
    );
  }
}
