import type { Database } from '../../database/database.js';
import { RunQueueRepository } from '../queue/run-queue.repository.js';

/** What the log says when the service-hosted workers start refusing (SingleTeamGate), once. */
export const UNCONFINED_MANY_TEAMS =
  'service-hosted workers take no run: their harnesses would run unconfined (sandbox none), and this ' +
  'service holds more than one team — an unconfined harness reads what the service reads (DATA_DIR and ' +
  'its secrets key, every team’s workspaces) and reaches the database and the service itself. Runs stay ' +
  'queued until they can be confined: install bubblewrap (apt-get install bubblewrap), run the service ' +
  'as root (user mode), set WORKER_BACKEND=docker, or run each team’s harnesses on its own self-hosted ' +
  'workers (factoryd worker, WORKER_CONCURRENCY=0 here)';

/** What a run waiting for such workers says (its status message), to its team. */
export const WAITING_FOR_CONFINEMENT =
  'Waiting: the service’s own workers run no harness while nothing confines harnesses on their machine ' +
  '(sandbox none) and the service holds more than one team. Its operator can confine them (bubblewrap, ' +
  'root, or WORKER_BACKEND=docker), or the run can go to a self-hosted worker of this team (worker_host)';

/**
 * Harnesses in sandbox `none` run as the service's own user with everything it has: fit for a
 * service of one team, whose harnesses can reach nothing but that team's (and the operator's) own.
 * The teams are counted at each claim (two rows at most), not once at the start, since a team can be
 * made at any time by the CLI or another replica; once a second one exists the gate stays shut
 * (teams are never deleted) and counts no more. While shut, each queued run says why it waits.
 */
export class SingleTeamGate {
  private shut = false;
  private readonly queue: RunQueueRepository;

  constructor(
    private readonly db: Database,
    private readonly log: { error(line: string): void },
  ) {
    this.queue = new RunQueueRepository(db);
  }

  async open(): Promise<boolean> {
    if (!this.shut) {
      const [row] = await this.db.query<{ teams: number }>(
        `SELECT count(*)::int AS teams FROM (SELECT 1 FROM teams LIMIT 2) t`,
      );
      if ((row?.teams ?? 0) < 2) return true;
      this.shut = true;
      this.log.error(UNCONFINED_MANY_TEAMS);
    }
    await this.queue.noteServiceRefusing(WAITING_FOR_CONFINEMENT);
    return false;
  }
}
