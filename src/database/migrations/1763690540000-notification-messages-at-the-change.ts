import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A state change writes its messages itself, one per subscribed endpoint, in its own transaction:
 * the outbox and the dispatchers' fan-out are gone. The fan-out was one statement at a time for every
 * team (in order per run), on the path of every message: a team whose endpoint made many messages
 * lengthened every other team's wait for theirs (docs/notifications.md, "Figures"), and each event
 * was written twice and deleted once. Now a team's messages cost its own transactions, and a message
 * is due from its commit.
 *
 * In order per run still holds: a run's state changes take its row lock, so a later change of a run
 * commits after an earlier one and takes a later event id. Events share one sequence
 * (`notification_event_ids`), continuing the outbox's. The first attempt's pause
 * (NOTIFICATIONS_RETRY_SCHEDULE_MS's first, 0 by default) is read from `notification_settings`, which
 * dispatchers write as they start. Events still in the outbox are made into messages here.
 */
export class NotificationMessagesAtTheChange1763690540000 implements MigrationInterface {
  name = 'NotificationMessagesAtTheChange1763690540000';

  async up(db: QueryRunner): Promise<void> {
    await db.query(`CREATE SEQUENCE notification_event_ids`);
    await db.query(
      `SELECT setval('notification_event_ids', (SELECT last_value FROM notification_outbox_id_seq))`,
    );
    await db.query(`
      CREATE TABLE notification_settings (
        only_row                boolean PRIMARY KEY DEFAULT true CHECK (only_row),
        first_attempt_delay_ms  int NOT NULL DEFAULT 0
      )`);
    await db.query(`INSERT INTO notification_settings DEFAULT VALUES`);
    // The events of one statement (a row per event, ids taken here) become messages: one per enabled
    // endpoint of the event's team that subscribes to its type (and its factory, when the endpoint names one).
    await db.query(`
      CREATE FUNCTION notification_messages_of(events jsonb) RETURNS void LANGUAGE sql AS $$
        INSERT INTO notification_messages (event_id, endpoint_id, team_id, type, run_id, payload, event_at, next_attempt_at)
        SELECT ev.id, e.id, ev.team_id, ev.type, ev.run_id, ev.payload, ev.at,
               ev.at + make_interval(secs => (SELECT s.first_attempt_delay_ms FROM notification_settings s) / 1000.0)
          FROM jsonb_to_recordset(events) AS ev(id bigint, team_id uuid, factory_id uuid, type text, run_id uuid,
                                                payload jsonb, at timestamptz)
          JOIN notification_endpoints e ON e.team_id = ev.team_id AND e.enabled
         WHERE (e.factory_id IS NULL OR e.factory_id = ev.factory_id)
           AND (cardinality(e.event_types) = 0 OR ev.type = ANY(e.event_types))
         ORDER BY ev.id
      $$`);
    // A run's event: its state, and the one before (NULL for a new run).
    await db.query(`
      CREATE FUNCTION notification_run_event(r runs, previous_state text) RETURNS jsonb LANGUAGE sql AS $$
        SELECT jsonb_build_object(
          'id', nextval('notification_event_ids'), 'team_id', r.team_id,
          'factory_id', (SELECT w.factory_id FROM webhooks w WHERE w.uid = r.metadata->>'webhook_uid'),
          'type', 'run.' || lower(r.state), 'run_id', r.id, 'at', clock_timestamp(),
          'payload', jsonb_build_object('run_id', r.id, 'state', r.state, 'previous_state', previous_state,
                                        'title', r.title, 'source', r.source,
                                        'status_message', r.status_message, 'updated_at', r.updated_at))
      $$`);
    await db.query(`
      CREATE FUNCTION notification_messages_run() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF EXISTS (SELECT 1 FROM notification_endpoints e WHERE e.team_id = NEW.team_id AND e.enabled) THEN
          PERFORM notification_messages_of(jsonb_build_array(notification_run_event(NEW, OLD.state)));
        END IF;
        RETURN NULL;
      END $$`);
    await db.query(`
      CREATE FUNCTION notification_messages_runs_created() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        PERFORM notification_messages_of(jsonb_agg(notification_run_event(n, NULL)))
           FROM new_runs n
          WHERE n.team_id IN (SELECT e.team_id FROM notification_endpoints e WHERE e.enabled)
         HAVING count(*) > 0;
        RETURN NULL;
      END $$`);
    await db.query(`
      CREATE FUNCTION notification_messages_deliveries() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        PERFORM notification_messages_of(jsonb_agg(ev ORDER BY ev.id)) FROM (
          SELECT nextval('notification_event_ids') AS id, w.team_id, w.factory_id,
                 CASE WHEN d.status = 'accepted' THEN 'delivery.accepted' ELSE 'delivery.rejected' END AS type,
                 NULL::uuid AS run_id, clock_timestamp() AS at,
                 jsonb_build_object('id', d.id, 'webhook_uid', w.uid, 'delivery_id', d.identity, 'status', d.status,
                                    'size_bytes', d.size_bytes, 'received_at', d.received_at) AS payload
            FROM new_deliveries d JOIN webhooks w ON w.id = d.webhook_id
           WHERE d.status <> 'duplicate'
             AND EXISTS (SELECT 1 FROM notification_endpoints e WHERE e.team_id = w.team_id AND e.enabled)
           ORDER BY d.received_at, d.id) ev
        HAVING count(*) > 0;
        RETURN NULL;
      END $$`);
    await db.query(`DROP TRIGGER runs_notification_created ON runs`);
    await db.query(`DROP TRIGGER runs_notification_state ON runs`);
    await db.query(`DROP TRIGGER deliveries_notification ON deliveries`);
    await db.query(`
      CREATE TRIGGER runs_notification_created AFTER INSERT ON runs REFERENCING NEW TABLE AS new_runs
        FOR EACH STATEMENT EXECUTE FUNCTION notification_messages_runs_created()`);
    await db.query(`
      CREATE TRIGGER runs_notification_state AFTER UPDATE OF state ON runs
        FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state) EXECUTE FUNCTION notification_messages_run()`);
    await db.query(`
      CREATE TRIGGER deliveries_notification AFTER INSERT ON deliveries REFERENCING NEW TABLE AS new_deliveries
        FOR EACH STATEMENT EXECUTE FUNCTION notification_messages_deliveries()`);
    // What the outbox still held becomes messages, as a fan-out would have made them.
    await db.query(`
      SELECT notification_messages_of(jsonb_agg(jsonb_build_object(
               'id', o.id, 'team_id', o.team_id, 'factory_id', o.factory_id, 'type', o.type, 'run_id', o.run_id,
               'payload', o.payload, 'at', o.created_at) ORDER BY o.id))
        FROM notification_outbox o HAVING count(*) > 0`);
    await db.query(`DROP TABLE notification_outbox`);
    await db.query(
      `DROP FUNCTION notification_outbox_run(), notification_outbox_runs_created(), notification_outbox_deliveries()`,
    );
  }

  // Not reverted: the outbox is gone, and a revert could not tell which messages it would have held.
  async down(_db: QueryRunner): Promise<void> {
    throw new Error(
      'NotificationMessagesAtTheChange1763690540000 cannot be reverted: the outbox it replaced is gone (restore a backup taken before it)',
    );
  }
}
