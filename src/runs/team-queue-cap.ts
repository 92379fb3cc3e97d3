import { Inject, Injectable } from '@nestjs/common';
import { RateLimited } from '../common/problem.js';
import { SERVICE_WORKER_HOST } from '../common/worker-host.js';
import { CONFIG, type Config } from '../config/config.js';
import { Database } from '../database/database.js';

/** How long a caller refused for a full queue waits before trying again: runs start in seconds. */
const QUEUE_FULL_RETRY_AFTER_SECONDS = 30;

/**
 * A team's queued runs are capped (TEAM_MAX_QUEUED_RUNS): a team that creates runs faster than its
 * slots start them is told so (429 with Retry-After, which the Oz clients retry on their own) instead
 * of filling the shared database with rows that wait. Checked where a caller creates runs one by one
 * and can retry: the run API and factory dispatch. Webhook deliveries and schedules have bounds of
 * their own (docs/security.md, "What bounds a team today"). A soft cap: two creations at the same
 * moment may both pass at the last free place.
 */
@Injectable()
export class TeamQueueCap {
  constructor(
    @Inject(Database) private readonly db: Database,
    @Inject(CONFIG) private readonly config: Pick<Config, 'teamMaxQueuedRuns'>,
  ) {}

  async ensureRoom(teamId: string): Promise<void> {
    const cap = this.config.teamMaxQueuedRuns;
    // Counts no further than the cap, through the queue's own indexes: service-hosted runs by
    // (worker_host, team_id) in runs_queue_team, self-hosted ones in runs_self_hosted_queue.
    const [row] = await this.db.query<{ queued: number }>(
      `SELECT count(*)::int AS queued FROM (
         SELECT 1 FROM runs WHERE state = 'QUEUED' AND worker_host = $3 AND team_id = $1
         UNION ALL
         SELECT 1 FROM runs WHERE state = 'QUEUED' AND worker_host <> $3 AND team_id = $1
         LIMIT $2) q`,
      [teamId, cap, SERVICE_WORKER_HOST],
    );
    if (row!.queued >= cap)
      throw new RateLimited(
        `this team has ${cap} runs queued, the most it may have (TEAM_MAX_QUEUED_RUNS): ` +
          'retry once some have started, or cancel some',
        QUEUE_FULL_RETRY_AFTER_SECONDS,
      );
  }
}
