import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Team secrets and the applied state of factory definitions: factories, their apply history, agents,
 * automations, webhooks and skills. Only the reconciler writes the definition tables; a removed file
 * becomes a tombstone (`deleted_at`), so UIDs and history stay resolvable.
 */
export class Definitions1763683300000 implements MigrationInterface {
  name = 'Definitions1763683300000';

  async up(db: QueryRunner): Promise<void> {
    await db.query(`
      CREATE TABLE secrets (
        id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        team_id          uuid NOT NULL REFERENCES teams(id) ON DELETE CASCADE,
        name             text NOT NULL,
        current_version  integer NOT NULL,
        created_at       timestamptz NOT NULL DEFAULT now(),
        updated_at       timestamptz NOT NULL DEFAULT now(),
        UNIQUE (team_id, name)
      )`);
    // Every value a secret ever had: a webhook pins the version it applied with.
    await db.query(`
      CREATE TABLE secret_versions (
        id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        secret_id   uuid NOT NULL REFERENCES secrets(id) ON DELETE CASCADE,
        version     integer NOT NULL,
        ciphertext  bytea NOT NULL,
        created_at  timestamptz NOT NULL DEFAULT now(),
        UNIQUE (secret_id, version)
      )`);
    await db.query(`
      CREATE TABLE factories (
        id                        uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        uid                       text NOT NULL UNIQUE,
        team_id                   uuid NOT NULL REFERENCES teams(id) ON DELETE CASCADE,
        name                      text NOT NULL,
        repo_url                  text NOT NULL,
        branch                    text NOT NULL DEFAULT 'main',
        managed                   boolean NOT NULL DEFAULT false,
        description               text,
        definition                jsonb,
        last_attempted_revision   text,
        last_applied_revision     text,
        ready                     boolean NOT NULL DEFAULT false,
        reason                    text,
        message                   text,
        created_at                timestamptz NOT NULL DEFAULT now(),
        updated_at                timestamptz NOT NULL DEFAULT now(),
        UNIQUE (team_id, name)
      )`);
    await db.query(`
      CREATE TABLE factory_applies (
        id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        factory_id   uuid NOT NULL REFERENCES factories(id) ON DELETE CASCADE,
        revision     text,
        result       text NOT NULL CHECK (result IN ('applied', 'failed', 'unchanged')),
        reason       text,
        errors       jsonb NOT NULL DEFAULT '[]',
        plan         jsonb,
        started_at   timestamptz NOT NULL,
        duration_ms  integer NOT NULL
      )`);
    await db.query(
      `CREATE INDEX factory_applies_factory ON factory_applies (factory_id, started_at DESC, id DESC)`,
    );
    await db.query(`
      CREATE TABLE agents (
        id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        factory_id   uuid NOT NULL REFERENCES factories(id) ON DELETE CASCADE,
        name         text NOT NULL,
        path         text NOT NULL,
        agent_type   text NOT NULL CHECK (agent_type IN ('FOREMAN', 'CUSTOM')),
        description  text,
        overrides    jsonb NOT NULL DEFAULT '{}',
        base_prompt  text NOT NULL DEFAULT '',
        deleted_at   timestamptz,
        created_at   timestamptz NOT NULL DEFAULT now(),
        updated_at   timestamptz NOT NULL DEFAULT now(),
        UNIQUE (factory_id, path)
      )`);
    await db.query(`
      CREATE TABLE automations (
        id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        factory_id   uuid NOT NULL REFERENCES factories(id) ON DELETE CASCADE,
        name         text NOT NULL,
        path         text NOT NULL,
        enabled      boolean NOT NULL DEFAULT true,
        agent_name   text,
        triggers     jsonb NOT NULL DEFAULT '[]',
        overrides    jsonb NOT NULL DEFAULT '{}',
        prompt       text NOT NULL DEFAULT '',
        deleted_at   timestamptz,
        created_at   timestamptz NOT NULL DEFAULT now(),
        updated_at   timestamptz NOT NULL DEFAULT now(),
        UNIQUE (factory_id, path)
      )`);
    await db.query(`
      CREATE TABLE webhooks (
        id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        uid                 text NOT NULL UNIQUE,
        factory_id          uuid NOT NULL REFERENCES factories(id) ON DELETE CASCADE,
        team_id             uuid NOT NULL REFERENCES teams(id) ON DELETE CASCADE,
        name                text NOT NULL,
        path                text NOT NULL,
        auth_mode           text NOT NULL CHECK (auth_mode IN ('token', 'url_token', 'signature')),
        signature_scheme    text,
        secret_name         text NOT NULL,
        secret_version_id   uuid REFERENCES secret_versions(id),
        delivery_id_header  text,
        enabled             boolean NOT NULL DEFAULT true,
        description         text,
        deleted_at          timestamptz,
        created_at          timestamptz NOT NULL DEFAULT now(),
        updated_at          timestamptz NOT NULL DEFAULT now()
      )`);
    // One live webhook per file; tombstones keep their UID and history.
    await db.query(
      `CREATE UNIQUE INDEX webhooks_live_path ON webhooks (factory_id, path) WHERE deleted_at IS NULL`,
    );
    await db.query(`
      CREATE TABLE factory_skills (
        id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        factory_id   uuid NOT NULL REFERENCES factories(id) ON DELETE CASCADE,
        name         text NOT NULL,
        path         text NOT NULL,
        description  text,
        content      text NOT NULL,
        deleted_at   timestamptz,
        created_at   timestamptz NOT NULL DEFAULT now(),
        updated_at   timestamptz NOT NULL DEFAULT now(),
        UNIQUE (factory_id, path)
      )`);
  }

  async down(db: QueryRunner): Promise<void> {
    for (const table of [
      'factory_skills',
      'webhooks',
      'automations',
      'agents',
      'factory_applies',
      'factories',
      'secret_versions',
      'secrets',
    ]) {
      await db.query(`DROP TABLE IF EXISTS ${table}`);
    }
  }
}
