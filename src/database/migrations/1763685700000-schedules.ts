import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Cron schedules (docs/schedules.md): made through the API, or reconciled from a factory's
 * `provider: schedule` triggers (then `automation_id` + `trigger_index` say which, and the factory
 * owns the row). `next_fire_at` is the claim: a replica fires a schedule only by moving it forward in
 * the transaction that inserts the run; NULL while paused.
 */
export class Schedules1763685700000 implements MigrationInterface {
  name = 'Schedules1763685700000';

  async up(db: QueryRunner): Promise<void> {
    await db.query(`
      CREATE TABLE schedules (
        id                uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        team_id           uuid NOT NULL REFERENCES teams(id) ON DELETE CASCADE,
        name              text NOT NULL,
        cron_schedule     text NOT NULL,
        prompt            text NOT NULL DEFAULT '',
        agent_config      jsonb NOT NULL DEFAULT '{}',
        metadata          jsonb,
        mode              text,
        agent_uid         text,
        enabled           boolean NOT NULL DEFAULT true,
        next_fire_at      timestamptz,
        last_fired_at     timestamptz,
        last_run_id       uuid,
        last_spawn_error  text,
        creator_id        uuid REFERENCES principals(id) ON DELETE SET NULL,
        updated_by_id     uuid REFERENCES principals(id) ON DELETE SET NULL,
        factory_id        uuid REFERENCES factories(id) ON DELETE CASCADE,
        automation_id     uuid REFERENCES automations(id) ON DELETE CASCADE,
        trigger_index     integer,
        created_at        timestamptz NOT NULL DEFAULT now(),
        updated_at        timestamptz NOT NULL DEFAULT now(),
        CHECK ((automation_id IS NULL) = (trigger_index IS NULL)),
        CHECK (enabled OR next_fire_at IS NULL),
        UNIQUE (automation_id, trigger_index)
      )`);
    // What each replica's scheduler reads every tick: the schedules due, oldest first.
    await db.query(`CREATE INDEX schedules_due ON schedules (next_fire_at) WHERE next_fire_at IS NOT NULL`);
    await db.query(`CREATE INDEX schedules_team_name ON schedules (team_id, name, id)`);
    await db.query(`CREATE INDEX schedules_factory ON schedules (factory_id) WHERE factory_id IS NOT NULL`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(`DROP TABLE schedules`);
  }
}
