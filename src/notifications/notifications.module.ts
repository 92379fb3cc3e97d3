import {
  Inject,
  Injectable,
  Logger,
  Module,
  type BeforeApplicationShutdown,
  type OnApplicationBootstrap,
} from '@nestjs/common';
import { Clock } from '../common/clock.js';
import { Metrics } from '../common/metrics.js';
import { CONFIG, type Config } from '../config/config.js';
import { Database } from '../database/database.js';
import { Notifications } from '../database/notifications.js';
import { SecretCipher } from '../secrets/secret-cipher.js';
import { SecretsModule } from '../secrets/secrets.module.js';
import { SecretsService } from '../secrets/secrets.service.js';
import { configuredDispatcher, readNotificationDepths } from './dispatcher-setup.js';
import { NotificationDispatcher } from './notification-dispatcher.js';
import { NotificationRetention } from './notification-retention.js';
import { NotificationEndpoints } from './notification-endpoints.service.js';
import { NotificationsController } from './notifications.controller.js';
import { NotificationsRepository } from './notifications.repository.js';

/**
 * `factoryd serve` sends notifications from every replica (they share the work through the database),
 * unless it serves the API alone (`--role api`: dispatchers run as processes of their own).
 */
@Injectable()
class DispatcherLifecycle implements OnApplicationBootstrap, BeforeApplicationShutdown {
  constructor(
    @Inject(NotificationDispatcher) private readonly dispatcher: NotificationDispatcher,
    @Inject(Notifications) private readonly notifications: Notifications,
    @Inject(CONFIG) private readonly config: Config,
  ) {}

  onApplicationBootstrap(): void {
    if (this.config.notificationsDispatcher) this.dispatcher.start(this.notifications);
  }

  async beforeApplicationShutdown(): Promise<void> {
    await this.dispatcher.stop();
  }
}

/** Layer 5: signed notifications out (docs/notifications.md). */
@Module({
  imports: [SecretsModule],
  controllers: [NotificationsController],
  providers: [
    {
      provide: NotificationsRepository,
      inject: [Database, Metrics],
      useFactory: (db: Database, metrics: Metrics) => {
        const repo = new NotificationsRepository(db);
        readNotificationDepths(metrics, repo);
        return repo;
      },
    },
    {
      provide: NotificationEndpoints,
      inject: [NotificationsRepository, SecretCipher, CONFIG, Clock, Notifications],
      useFactory: (
        repo: NotificationsRepository,
        cipher: SecretCipher,
        config: Config,
        clock: Clock,
        n: Notifications,
      ) =>
        new NotificationEndpoints(
          repo,
          cipher,
          { allowPrivateUrls: config.notificationsAllowPrivateUrls, now: () => clock.now() },
          n,
        ),
    },
    {
      provide: NotificationDispatcher,
      inject: [NotificationsRepository, SecretCipher, SecretsService, CONFIG, Clock, Metrics],
      useFactory: (
        repo: NotificationsRepository,
        cipher: SecretCipher,
        secrets: SecretsService,
        config: Config,
        clock: Clock,
        metrics: Metrics,
      ) => {
        const log = new Logger('notifications');
        return configuredDispatcher(
          repo,
          cipher,
          secrets,
          config,
          () => clock.now(),
          (line) => log.warn(line),
          metrics.countNotificationAttempt,
        );
      },
    },
    DispatcherLifecycle,
    NotificationRetention,
  ],
  exports: [NotificationEndpoints],
})
export class NotificationsModule {}
