import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A run's `status_message.error_code` is one of the clients' ErrorCode values, or absent where none
 * fits; factoryd's own reason moves to `status_message.reason` (docs/run-api.md, "Why a run ended").
 * Until now `error_code` held the reason itself (`agent_failed`, `lease_expired`, …), which the
 * Python client's strict validation refuses. Rewritten in the runs and in their recorded transitions,
 * as the table in src/workers/queue/run-decisions.ts maps them now.
 */
const MAPPED = `CASE status_message->>'error_code'
    WHEN 'max_duration' THEN 'budget_exceeded'
    WHEN 'lease_expired' THEN 'resource_unavailable'
    WHEN 'worker_lost' THEN 'resource_unavailable'
    WHEN 'environment_setup_failed' THEN 'environment_setup_failed'
  END`;
const REASONS = `('agent_failed', 'idle_timeout', 'max_duration', 'lease_expired', 'worker_lost', 'environment_setup_failed')`;

export class RunErrorCodes1763690410000 implements MigrationInterface {
  name = 'RunErrorCodes1763690410000';

  async up(db: QueryRunner): Promise<void> {
    for (const table of ['runs', 'run_transitions'])
      await db.query(
        `UPDATE ${table}
            SET status_message = (status_message - 'error_code')
                  || jsonb_build_object('reason', status_message->>'error_code')
                  || jsonb_strip_nulls(jsonb_build_object('error_code', ${MAPPED}))
          WHERE status_message->>'error_code' IN ${REASONS} AND NOT status_message ? 'reason'`,
      );
  }

  async down(db: QueryRunner): Promise<void> {
    for (const table of ['runs', 'run_transitions'])
      await db.query(
        `UPDATE ${table} SET status_message = (status_message - 'reason')
                  || jsonb_build_object('error_code', status_message->>'reason')
          WHERE status_message ? 'reason'`,
      );
  }
}
