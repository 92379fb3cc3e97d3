import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Signed notifications out (docs/notifications.md): endpoints, the outbox, messages and attempts.
 *
 * The outbox rows are written by triggers on `runs` and `deliveries`, so they commit in the same
 * transaction as the state change that caused them, whichever statement made it (RunsRepository,
 * the run queue's claim, the ingress's group commit), and `runs/` and `webhooks/` know nothing of
 * notifications. A trigger writes only when the team has an enabled endpoint (one index probe), so a
 * team without subscriptions pays nothing more; fan-out to endpoints happens later, in the dispatcher.
 */
export class NotificationOutbox1763686200000 implements MigrationInterface {
  name = 'NotificationOutbox1763686200000';

  async up(db: QueryRunner): Promise<void> {
    await db.query(`
      CREATE TABLE notification_endpoints (
        id                    uuid PRIMARY KEY,
        team_id               uuid NOT NULL REFERENCES teams(id) ON DELETE CASCADE,
        factory_id            uuid REFERENCES factories(id) ON DELETE CASCADE,
        name                  text NOT NULL,
        url                   text NOT NULL,
        event_types           text[] NOT NULL DEFAULT '{}',
        description           text,
        -- An endpoint made by the API holds its own sealed secret; one a factory file defines names a
        -- team secret's version (resolved when the file applies, like a webhook's).
        secret                bytea,
        secret_name           text,
        secret_version_id     uuid REFERENCES secret_versions(id),
        enabled               boolean NOT NULL DEFAULT true,
        disabled_reason       text,
        consecutive_failures  int NOT NULL DEFAULT 0,
        created_at            timestamptz NOT NULL DEFAULT now(),
        updated_at            timestamptz NOT NULL DEFAULT now(),
        UNIQUE (team_id, name)
      )`);
    await db.query(
      `CREATE INDEX notification_endpoints_enabled ON notification_endpoints (team_id) WHERE enabled`,
    );
    await db.query(`
      CREATE TABLE notification_outbox (
        id          bigserial PRIMARY KEY,
        team_id     uuid NOT NULL,
        factory_id  uuid,
        type        text NOT NULL,
        run_id      uuid,
        payload     jsonb NOT NULL,
        created_at  timestamptz NOT NULL DEFAULT clock_timestamp()
      )`);
    await db.query(`
      CREATE TABLE notification_messages (
        id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        event_id         bigint NOT NULL,
        endpoint_id      uuid NOT NULL REFERENCES notification_endpoints(id) ON DELETE CASCADE,
        team_id          uuid NOT NULL,
        type             text NOT NULL,
        run_id           uuid,
        payload          jsonb NOT NULL,
        event_at         timestamptz NOT NULL,
        status           text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
        attempts         int NOT NULL DEFAULT 0,
        next_attempt_at  timestamptz,
        leased_until     timestamptz,
        created_at       timestamptz NOT NULL DEFAULT now(),
        delivered_at     timestamptz,
        UNIQUE (endpoint_id, event_id)
      )`);
    await db.query(
      `CREATE INDEX notification_messages_due ON notification_messages (next_attempt_at) WHERE status = 'pending'`,
    );
    // "Is an earlier message of this run still pending for this endpoint?" (in order per run).
    await db.query(
      `CREATE INDEX notification_messages_run_order ON notification_messages (endpoint_id, run_id, event_id) WHERE status = 'pending'`,
    );
    await db.query(
      `CREATE INDEX notification_messages_endpoint ON notification_messages (endpoint_id, created_at DESC, id DESC)`,
    );
    await db.query(`
      CREATE TABLE notification_attempts (
        id                bigserial PRIMARY KEY,
        message_id        uuid NOT NULL REFERENCES notification_messages(id) ON DELETE CASCADE,
        endpoint_id       uuid NOT NULL REFERENCES notification_endpoints(id) ON DELETE CASCADE,
        attempted_at      timestamptz NOT NULL,
        succeeded         boolean NOT NULL,
        status_code       int,
        latency_ms        int NOT NULL,
        error             text,
        response_excerpt  text,
        manual            boolean NOT NULL DEFAULT false
      )`);
    await db.query(
      `CREATE INDEX notification_attempts_endpoint ON notification_attempts (endpoint_id, attempted_at DESC, id DESC)`,
    );
    await db.query(`CREATE INDEX notification_attempts_message ON notification_attempts (message_id, id)`);

    // A run's state change: one outbox row per new state, with the run's factory when one of its
    // webhooks started it.
    await db.query(`
      CREATE FUNCTION notification_outbox_run() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF EXISTS (SELECT 1 FROM notification_endpoints e WHERE e.team_id = NEW.team_id AND e.enabled) THEN
          INSERT INTO notification_outbox (team_id, factory_id, type, run_id, payload)
          VALUES (NEW.team_id,
                  (SELECT w.factory_id FROM webhooks w WHERE w.uid = NEW.metadata->>'webhook_uid'),
                  'run.' || lower(NEW.state), NEW.id,
                  jsonb_build_object('run_id', NEW.id, 'state', NEW.state,
                                     'previous_state', CASE WHEN TG_OP = 'UPDATE' THEN OLD.state END,
                                     'title', NEW.title, 'source', NEW.source,
                                     'status_message', NEW.status_message, 'updated_at', NEW.updated_at));
        END IF;
        RETURN NULL;
      END $$`);
    await db.query(`
      CREATE TRIGGER runs_notification_created AFTER INSERT ON runs
        FOR EACH ROW EXECUTE FUNCTION notification_outbox_run()`);
    await db.query(`
      CREATE TRIGGER runs_notification_state AFTER UPDATE OF state ON runs
        FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state) EXECUTE FUNCTION notification_outbox_run()`);

    // Deliveries: once per statement (the ingress writes a batch per statement); Duplicates are not events.
    await db.query(`
      CREATE FUNCTION notification_outbox_deliveries() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        INSERT INTO notification_outbox (team_id, factory_id, type, payload)
        SELECT w.team_id, w.factory_id,
               CASE WHEN d.status = 'accepted' THEN 'delivery.accepted' ELSE 'delivery.rejected' END,
               jsonb_build_object('id', d.id, 'webhook_uid', w.uid, 'delivery_id', d.identity, 'status', d.status,
                                  'size_bytes', d.size_bytes, 'received_at', d.received_at)
          FROM new_deliveries d JOIN webhooks w ON w.id = d.webhook_id
         WHERE d.status <> 'duplicate'
           AND EXISTS (SELECT 1 FROM notification_endpoints e WHERE e.team_id = w.team_id AND e.enabled)
         ORDER BY d.received_at, d.id;
        RETURN NULL;
      END $$`);
    await db.query(`
      CREATE TRIGGER deliveries_notification AFTER INSERT ON deliveries
        REFERENCING NEW TABLE AS new_deliveries
        FOR EACH STATEMENT EXECUTE FUNCTION notification_outbox_deliveries()`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(`DROP TRIGGER deliveries_notification ON deliveries`);
    await db.query(`DROP TRIGGER runs_notification_state ON runs`);
    await db.query(`DROP TRIGGER runs_notification_created ON runs`);
    await db.query(`DROP FUNCTION notification_outbox_deliveries()`);
    await db.query(`DROP FUNCTION notification_outbox_run()`);
    await db.query(
      `DROP TABLE notification_attempts, notification_messages, notification_outbox, notification_endpoints`,
    );
  }
}
