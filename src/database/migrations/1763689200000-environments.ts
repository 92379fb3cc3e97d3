import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Environments (docs/environments.md): where a run works. Each is defined by a factory's
 * environments/<name>.yaml (the reconciler writes them; the API writes the file of a managed factory),
 * named uniquely in its team. `config` is the file's content in definition shape; secrets by name only.
 * A run records the environment it used, as resolved (the commits checked out among it), in
 * `runs.environment`, so that it can be reproduced.
 */
export class Environments1763689200000 implements MigrationInterface {
  name = 'Environments1763689200000';

  async up(db: QueryRunner): Promise<void> {
    await db.query(`
      CREATE TABLE environments (
        id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        uid         text NOT NULL UNIQUE,
        team_id     uuid NOT NULL REFERENCES teams(id) ON DELETE CASCADE,
        factory_id  uuid NOT NULL REFERENCES factories(id) ON DELETE CASCADE,
        name        text NOT NULL,
        config      jsonb NOT NULL,
        created_at  timestamptz NOT NULL DEFAULT now(),
        updated_at  timestamptz NOT NULL DEFAULT now(),
        UNIQUE (team_id, name)
      )`);
    await db.query(`CREATE INDEX environments_factory ON environments (factory_id)`);
    await db.query(`ALTER TABLE runs ADD COLUMN environment jsonb`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(`ALTER TABLE runs DROP COLUMN environment`);
    await db.query(`DROP TABLE environments`);
  }
}
