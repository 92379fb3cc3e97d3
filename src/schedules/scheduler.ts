import {
  Inject,
  Injectable,
  Logger,
  type BeforeApplicationShutdown,
  type OnApplicationBootstrap,
} from '@nestjs/common';
import { DefinitionsListener } from '../automations/definitions-listener.js';
import { Clock } from '../common/clock.js';
import { FactorySchedules } from './factory-schedules.js';
import { ScheduleFiring } from './schedule-firing.js';

/** How often each replica looks for due schedules: a firing starts within this of its minute. */
export const SCHEDULER_POLL_MS = 1000;

/**
 * The scheduler every replica runs: each tick fires what is due by the Clock (ScheduleFiring claims
 * each firing in PostgreSQL, so replicas never double one), and each announced apply brings the
 * factory's schedules in step with its files.
 */
@Injectable()
export class Scheduler implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly log = new Logger('schedules');
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private stopped = false;
  /** A tick is waiting to start: further wakes join it. */
  private queued = false;
  /** Factories announced since the last tick; `syncAll`: every factory (at start, after a lost connection). */
  private pendingSync = new Set<string>();
  private syncAll = true;
  private failing = false;

  constructor(
    @Inject(ScheduleFiring) private readonly firing: ScheduleFiring,
    @Inject(FactorySchedules) private readonly factories: FactorySchedules,
    @Inject(DefinitionsListener) private readonly applies: DefinitionsListener,
    @Inject(Clock) private readonly clock: Clock,
  ) {}

  onApplicationBootstrap(): void {
    this.applies.subscribe((factoryId) => {
      if (factoryId === undefined) this.syncAll = true;
      else this.pendingSync.add(factoryId);
      this.wake();
    });
    this.wake();
  }

  async beforeApplicationShutdown(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  /** One tick now (or right after the one running): sync what was announced, then fire what is due. */
  wake(): void {
    if (this.stopped || this.queued) return;
    clearTimeout(this.timer);
    this.queued = true;
    this.running = (this.running ?? Promise.resolve()).then(() => {
      this.queued = false;
      return this.tick();
    });
  }

  private async tick(): Promise<void> {
    if (this.stopped) return;
    try {
      const all = this.syncAll;
      const some = [...this.pendingSync];
      this.syncAll = false;
      this.pendingSync = new Set();
      if (all) await this.factories.syncAll();
      else for (const id of some) await this.factories.sync(id);
      await this.firing.fireDue(this.clock.now());
      if (this.failing) this.log.log('scheduler: firing again');
      this.failing = false;
    } catch (err) {
      // The database restarting, a connection cut: the next tick tries again; announced syncs are redone.
      this.syncAll = true;
      // Said once per outage, not once a second.
      if (!this.failing) this.log.warn(`scheduler: ${err instanceof Error ? err.message : String(err)}`);
      this.failing = true;
    }
    if (this.stopped) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.wake(), SCHEDULER_POLL_MS);
    this.timer.unref();
  }
}
