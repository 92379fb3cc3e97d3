import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The outbox rows of new runs are written once per statement, not once per row. The ingress inserts a
 * batch of runs per statement; a row trigger ran a PL/pgSQL call and its own endpoint lookup for each
 * of them, on the hot path of every webhook delivery, even for teams that subscribe nothing. The
 * statement trigger reads the batch from its transition table and looks the endpoints up once.
 * State changes keep their row trigger (a worker changes one run per statement).
 */
export class RunCreatedOutboxPerStatement1763688500000 implements MigrationInterface {
  name = 'RunCreatedOutboxPerStatement1763688500000';

  async up(db: QueryRunner): Promise<void> {
    await db.query(`
      CREATE FUNCTION notification_outbox_runs_created() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        INSERT INTO notification_outbox (team_id, factory_id, type, run_id, payload)
        SELECT n.team_id, (SELECT w.factory_id FROM webhooks w WHERE w.uid = n.metadata->>'webhook_uid'),
               'run.' || lower(n.state), n.id,
               jsonb_build_object('run_id', n.id, 'state', n.state, 'previous_state', NULL,
                                  'title', n.title, 'source', n.source,
                                  'status_message', n.status_message, 'updated_at', n.updated_at)
          FROM new_runs n
         WHERE n.team_id IN (SELECT e.team_id FROM notification_endpoints e WHERE e.enabled)
         ORDER BY n.created_at, n.id;
        RETURN NULL;
      END $$`);
    await db.query(`DROP TRIGGER runs_notification_created ON runs`);
    await db.query(`
      CREATE TRIGGER runs_notification_created AFTER INSERT ON runs REFERENCING NEW TABLE AS new_runs
        FOR EACH STATEMENT EXECUTE FUNCTION notification_outbox_runs_created()`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(`DROP TRIGGER runs_notification_created ON runs`);
    await db.query(`
      CREATE TRIGGER runs_notification_created AFTER INSERT ON runs
        FOR EACH ROW EXECUTE FUNCTION notification_outbox_run()`);
    await db.query(`DROP FUNCTION notification_outbox_runs_created()`);
  }
}
