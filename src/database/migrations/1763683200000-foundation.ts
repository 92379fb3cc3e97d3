import type { MigrationInterface, QueryRunner } from 'typeorm';

/** Teams, principals, API keys and runs: what the Run API needs. */
export class Foundation1763683200000 implements MigrationInterface {
  name = 'Foundation1763683200000';

  async up(db: QueryRunner): Promise<void> {
    await db.query(`CREATE EXTENSION IF NOT EXISTS pg_trgm`);
    await db.query(`
      CREATE TABLE teams (
        id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        uid         text NOT NULL UNIQUE,
        name        text NOT NULL UNIQUE,
        created_at  timestamptz NOT NULL DEFAULT now()
      )`);
    // A principal is who acts: a person or a service account. API keys belong to a principal,
    // which may be a member of several teams.
    await db.query(`
      CREATE TABLE principals (
        id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        uid           text NOT NULL UNIQUE,
        type          text NOT NULL CHECK (type IN ('user', 'service_account')),
        display_name  text NOT NULL,
        created_at    timestamptz NOT NULL DEFAULT now()
      )`);
    await db.query(`
      CREATE TABLE team_members (
        team_id       uuid NOT NULL REFERENCES teams(id) ON DELETE CASCADE,
        principal_id  uuid NOT NULL REFERENCES principals(id) ON DELETE CASCADE,
        PRIMARY KEY (team_id, principal_id)
      )`);
    await db.query(`CREATE INDEX team_members_principal ON team_members (principal_id)`);
    await db.query(`
      CREATE TABLE api_keys (
        id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        principal_id  uuid NOT NULL REFERENCES principals(id) ON DELETE CASCADE,
        name          text NOT NULL,
        prefix        text NOT NULL,
        key_hash      bytea NOT NULL UNIQUE,
        scopes        text[] NOT NULL,
        created_at    timestamptz NOT NULL DEFAULT now(),
        last_used_at  timestamptz,
        revoked_at    timestamptz
      )`);
    await db.query(`
      CREATE TABLE runs (
        id                  uuid PRIMARY KEY,
        team_id             uuid NOT NULL REFERENCES teams(id),
        title               text NOT NULL,
        prompt              text NOT NULL,
        state               text NOT NULL CHECK (state IN ('QUEUED','PENDING','CLAIMED','INPROGRESS','SUCCEEDED','FAILED','BLOCKED','ERROR','CANCELLED')),
        source              text NOT NULL,
        creator_id          uuid REFERENCES principals(id),
        agent_config        jsonb NOT NULL DEFAULT '{}',
        config_name         text,
        model_id            text,
        environment_id      text,
        skill_spec          text,
        worker_host         text NOT NULL DEFAULT 'warp',
        metadata            jsonb,
        conversation_id     uuid NOT NULL,
        parent_run_id       uuid,
        mode                text,
        session_id          uuid,
        status_message      jsonb,
        artifacts           jsonb,
        agent_skill         jsonb,
        execution_location  text,
        created_at          timestamptz NOT NULL,
        updated_at          timestamptz NOT NULL,
        started_at          timestamptz,
        ended_at            timestamptz
      )`);
    // Keyset pages: one index per sort key, led by the team (every query is per team).
    await db.query(`CREATE INDEX runs_team_updated ON runs (team_id, updated_at DESC, id DESC)`);
    await db.query(`CREATE INDEX runs_team_created ON runs (team_id, created_at DESC, id DESC)`);
    await db.query(`CREATE INDEX runs_team_title ON runs (team_id, title, id)`);
    await db.query(`CREATE INDEX runs_team_state_updated ON runs (team_id, state, updated_at DESC, id DESC)`);
    await db.query(
      `CREATE INDEX runs_team_name_updated ON runs (team_id, config_name, updated_at DESC, id DESC)`,
    );
    await db.query(`CREATE INDEX runs_metadata ON runs USING gin (metadata jsonb_path_ops)`);
    await db.query(`CREATE INDEX runs_conversation ON runs (conversation_id, created_at)`);
    // `q` searches title, prompt and skill spec; the expression must match RUN_SEARCH_TEXT.
    await db.query(
      `CREATE INDEX runs_search ON runs USING gin ((title || ' ' || prompt || ' ' || coalesce(skill_spec, '')) gin_trgm_ops)`,
    );
    await db.query(`
      CREATE TABLE run_followups (
        id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        run_id        uuid NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        message       text NOT NULL,
        mode          text,
        created_at    timestamptz NOT NULL DEFAULT now(),
        delivered_at  timestamptz
      )`);
    await db.query(`CREATE INDEX run_followups_run ON run_followups (run_id, created_at)`);
    await db.query(`
      CREATE TABLE run_attachments (
        id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        run_id        uuid NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        file_name     text NOT NULL,
        content_type  text NOT NULL,
        content       bytea NOT NULL,
        created_at    timestamptz NOT NULL DEFAULT now(),
        UNIQUE (run_id, file_name)
      )`);
  }

  async down(db: QueryRunner): Promise<void> {
    for (const table of [
      'run_attachments',
      'run_followups',
      'runs',
      'api_keys',
      'team_members',
      'principals',
      'teams',
    ]) {
      await db.query(`DROP TABLE IF EXISTS ${table}`);
    }
  }
}
