import {
  Inject,
  Injectable,
  Logger,
  type BeforeApplicationShutdown,
  type OnApplicationBootstrap,
} from '@nestjs/common';
import { Clock } from '../common/clock.js';
import { Periodic, startPeriodic } from '../common/periodic.js';
import { CHANNELS } from '../database/channels.js';
import { Notifications } from '../database/notifications.js';
import { FactorySchedules } from './factory-schedules.js';
import { ScheduleFiring } from './schedule-firing.js';

/** How often each replica looks for due schedules: a firing starts within this of its minute. */
const SCHEDULER_POLL_MS = 1000;

/**
 * The scheduler every replica runs: each tick brings the factories announced since the last one in
 * step with their files, then fires what is due by the Clock (ScheduleFiring claims each firing in
 * PostgreSQL, so replicas never double one).
 */
@Injectable()
export class Scheduler implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly log = new Logger('schedules');
  private task?: Periodic;
  /** Factories announced since the last tick; `syncAll`: every factory (at start, after a lost listener). */
  private pendingSync = new Set<string>();
  private syncAll = true;
  /** Said once per outage, not once a second. */
  private failing = false;

  constructor(
    @Inject(ScheduleFiring) private readonly firing: ScheduleFiring,
    @Inject(FactorySchedules) private readonly factories: FactorySchedules,
    @Inject(Notifications) private readonly notifications: Notifications,
    @Inject(Clock) private readonly clock: Clock,
  ) {}

  onApplicationBootstrap(): void {
    this.notifications.subscribe(CHANNELS.definitionsApplied, {
      notified: (factoryId) => this.pendingSync.add(factoryId),
      // Applies may have been missed while the listener was cut off.
      resync: () => (this.syncAll = true),
    });
    this.task = startPeriodic({
      everyMs: SCHEDULER_POLL_MS,
      firstAfterMs: 0,
      run: () => this.tick(),
      onError: (err) => {
        // The database restarting, a connection cut: the next tick tries again; syncs are redone.
        this.syncAll = true;
        if (!this.failing) this.log.warn(`scheduler: ${err instanceof Error ? err.message : String(err)}`);
        this.failing = true;
      },
    });
  }

  async beforeApplicationShutdown(): Promise<void> {
    await this.task?.stop();
  }

  private async tick(): Promise<void> {
    const all = this.syncAll;
    const some = [...this.pendingSync];
    this.syncAll = false;
    this.pendingSync = new Set();
    if (all) await this.factories.syncAll();
    else for (const id of some) await this.factories.sync(id);
    await this.firing.fireDue(this.clock.now());
    if (this.failing) this.log.log('scheduler: firing again');
    this.failing = false;
  }
}
