import type { Metrics } from '../common/metrics.js';
import type { Config } from '../config/config.js';
import type { SecretCipher } from '../secrets/secret-cipher.js';
import type { SecretsService } from '../secrets/secrets.service.js';
import { NotificationDispatcher, type DispatcherOptions } from './notification-dispatcher.js';
import { NotificationSender } from './notification-sender.js';
import type { NotificationsRepository } from './notifications.repository.js';

/**
 * The dispatcher as configured, wherever it runs: inside `factoryd serve`, or in a process of its own
 * (`factoryd serve --role notifications`). `warn` gets its errors and the endpoints it disables.
 */
export function configuredDispatcher(
  repo: NotificationsRepository,
  cipher: SecretCipher,
  secrets: Pick<SecretsService, 'valueOf'>,
  config: Config,
  now: () => Date,
  warn: (line: string) => void,
  onAttempt?: DispatcherOptions['onAttempt'],
): NotificationDispatcher {
  return new NotificationDispatcher(
    repo,
    new NotificationSender({
      allowPrivate: config.notificationsAllowPrivateUrls,
      timeoutMs: config.notificationsTimeoutMs,
      connectionsPerEndpoint: config.notificationsConnectionsPerEndpoint,
      now,
    }),
    cipher,
    secrets,
    {
      retryScheduleMs: config.notificationsRetryScheduleMs,
      disableAfter: config.notificationsDisableAfter,
      timeoutMs: config.notificationsTimeoutMs,
      connectionsPerEndpoint: config.notificationsConnectionsPerEndpoint,
      now,
      onAttempt,
      onError: (err) => warn(`dispatcher: ${err instanceof Error ? err.message : String(err)}`),
      onDisabled: (id) =>
        warn(`endpoint ${id} disabled: ${config.notificationsDisableAfter} messages in a row failed`),
    },
  );
}

/**
 * The pending messages' depth, read at each scrape of `metrics`: by every process that serves the
 * notifications (`serve`) or sends them (`serve --role notifications`).
 */
export function readNotificationDepths(metrics: Metrics, repo: NotificationsRepository): void {
  metrics.addDepthReader(async () => {
    metrics.messagesPending.set(await repo.pendingMessages());
  }, [metrics.messagesPending]);
}
