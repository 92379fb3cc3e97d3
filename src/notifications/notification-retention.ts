import { Inject, Injectable, Logger, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { Clock } from '../common/clock.js';
import { Periodic } from '../common/periodic.js';
import { CONFIG, type Config } from '../config/config.js';
import { NotificationsRepository } from './notifications.repository.js';

const EVERY_MS = 15 * 60 * 1000;
const DAY_MS = 24 * 60 * 60 * 1000;

/**
 * Prunes settled notification messages and their attempts every 15 minutes, those older than
 * NOTIFICATIONS_RETENTION_DAYS: the messages and attempts tables would otherwise grow with every
 * event sent, forever. Idempotent, so every replica may run it.
 */
@Injectable()
export class NotificationRetention implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger(NotificationRetention.name);
  private readonly periodic = new Periodic({
    everyMs: EVERY_MS,
    run: () => this.runOnce(),
    onError: (err) => this.logger.warn({ err }, 'notification retention failed'),
  });

  constructor(
    @Inject(NotificationsRepository) private readonly repo: NotificationsRepository,
    @Inject(CONFIG) private readonly config: Config,
    @Inject(Clock) private readonly clock: Clock,
  ) {}

  onModuleInit(): void {
    this.periodic.start();
  }

  async onApplicationShutdown(): Promise<void> {
    await this.periodic.stop();
  }

  runOnce(): Promise<number> {
    const before = new Date(this.clock.now().getTime() - this.config.notificationsRetentionDays * DAY_MS);
    return this.repo.pruneSettled(before);
  }
}
