import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The queue of runs waiting for a self-hosted host, apart from the service-hosted queue: the
 * housekeeping's "no self-hosted worker connected" notes read it every pass (RunQueueRepository.
 * noteUnservedHostsIn). Through runs_queue_team they read every queued run of every host, and a
 * backlog of service-hosted runs made each pass take minutes. 'warp' is SERVICE_WORKER_HOST.
 */
export class SelfHostedQueue1763686400000 implements MigrationInterface {
  name = 'SelfHostedQueue1763686400000';

  async up(db: QueryRunner): Promise<void> {
    await db.query(
      `CREATE INDEX runs_self_hosted_queue ON runs (worker_host, team_id) WHERE state = 'QUEUED' AND worker_host <> 'warp'`,
    );
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(`DROP INDEX IF EXISTS runs_self_hosted_queue`);
  }
}
