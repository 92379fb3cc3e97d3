import { Inject, Injectable, Logger, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { Clock } from '../common/clock.js';
import { Periodic } from '../common/periodic.js';
import { Database } from '../database/database.js';
import { DeliveryLog } from './delivery-log.js';

const EVERY_MS = 15 * 60 * 1000;

/**
 * Prunes the delivery log every 15 minutes (newest 50 and the last 7 days per webhook stay) and
 * drops expired rate-limit counters. Idempotent, so every replica may run it.
 */
@Injectable()
export class DeliveryRetention implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger(DeliveryRetention.name);
  private readonly periodic = new Periodic({
    everyMs: EVERY_MS,
    run: () => this.runOnce(),
    onError: (err) => this.logger.warn({ err }, 'delivery log retention failed'),
  });

  constructor(
    @Inject(DeliveryLog) private readonly log: DeliveryLog,
    @Inject(Database) private readonly db: Database,
    @Inject(Clock) private readonly clock: Clock,
  ) {}

  onModuleInit(): void {
    this.periodic.start();
  }

  async onApplicationShutdown(): Promise<void> {
    await this.periodic.stop();
  }

  async runOnce(): Promise<number> {
    const now = this.clock.now();
    await this.db.execute(`DELETE FROM rate_limits WHERE expires_at < $1`, [now.getTime()]);
    return this.log.prune(now);
  }
}
