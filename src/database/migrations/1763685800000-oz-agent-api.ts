import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The rest of the Oz client surface (docs/run-api.md, "Every client method"): named agents
 * (`agent_identities`), what runs leave behind (`run_artifacts`: plans, pull requests, files,
 * screenshots, external references; a file may be a handoff for the run's next execution), and who
 * executed a run when it ran as a named agent (`runs.executor`).
 */
export class OzAgentApi1763685800000 implements MigrationInterface {
  name = 'OzAgentApi1763685800000';

  async up(db: QueryRunner): Promise<void> {
    await db.query(`
      CREATE TABLE agent_identities (
        id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        uid          text NOT NULL UNIQUE,
        team_id      uuid NOT NULL REFERENCES teams(id) ON DELETE CASCADE,
        name         text NOT NULL,
        defaults     jsonb NOT NULL DEFAULT '{}',
        mcp_sealed   bytea,
        created_at   timestamptz NOT NULL,
        updated_at   timestamptz NOT NULL
      )`);
    await db.query(`CREATE INDEX agent_identities_team ON agent_identities (team_id, name)`);
    await db.query(`
      CREATE TABLE run_artifacts (
        id             uuid PRIMARY KEY,
        run_id         uuid NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        team_id        uuid NOT NULL REFERENCES teams(id) ON DELETE CASCADE,
        execution      integer NOT NULL,
        artifact_type  text NOT NULL,
        data           jsonb NOT NULL,
        content_type   text,
        content        bytea,
        handoff        boolean NOT NULL DEFAULT false,
        created_at     timestamptz NOT NULL
      )`);
    await db.query(`CREATE INDEX run_artifacts_run ON run_artifacts (run_id, created_at)`);
    await db.query(`ALTER TABLE runs ADD COLUMN executor jsonb`);
    // The session redirect finds a run by its session.
    await db.query(`CREATE INDEX runs_session ON runs (session_id) WHERE session_id IS NOT NULL`);
    // ancestor_run_id walks parent_run_id down from a run.
    await db.query(`CREATE INDEX runs_parent ON runs (parent_run_id) WHERE parent_run_id IS NOT NULL`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(`DROP INDEX IF EXISTS runs_parent`);
    await db.query(`DROP INDEX IF EXISTS runs_session`);
    await db.query(`ALTER TABLE runs DROP COLUMN IF EXISTS executor`);
    await db.query(`DROP TABLE IF EXISTS run_artifacts`);
    await db.query(`DROP TABLE IF EXISTS agent_identities`);
  }
}
