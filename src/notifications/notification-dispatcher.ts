import type { Notifications } from '../database/notifications.js';
import { CHANNELS } from '../database/channels.js';
import { Periodic, type Scheduler } from '../common/periodic.js';
import type { SecretCipher } from '../secrets/secret-cipher.js';
import type { SecretsService } from '../secrets/secrets.service.js';
import { nextAttemptDelay } from './notification-policy.js';
import type { NotificationSender } from './notification-sender.js';
import type { DueMessage, NotificationsRepository } from './notifications.repository.js';
import { messageBody } from './notification-endpoints.service.js';

export interface DispatcherOptions {
  retryScheduleMs: readonly number[];
  disableAfter: number;
  timeoutMs: number;
  now: () => Date;
  /** How often the outbox and the due messages are looked at (ms). */
  pollMs?: number;
  /** Attempts in flight at once in this process. */
  concurrency?: number;
  scheduler?: Scheduler;
  onError: (err: unknown) => void;
  onDisabled?: (endpointId: string) => void;
}

/**
 * Sends notifications: fans committed outbox events out into messages (one per subscribed endpoint),
 * claims due messages (SKIP LOCKED and a lease: any number of replicas), POSTs each signed, logs the
 * attempt, and schedules the retry, gives up, or disables the endpoint (docs/notifications.md).
 *
 * The outbox is polled (every `pollMs`) rather than announced: a NOTIFY per state change would
 * serialise the commits of runs and deliveries (DESIGN.md). Resends and re-enabled endpoints are
 * announced on CHANNELS.notificationsDue.
 */
export class NotificationDispatcher {
  private readonly periodic: Periodic;
  private running?: Promise<void>;
  private again = false;
  private unsubscribe?: () => void;

  constructor(
    private readonly repo: NotificationsRepository,
    private readonly sender: NotificationSender,
    private readonly cipher: SecretCipher,
    private readonly secrets: Pick<SecretsService, 'valueOf'>,
    private readonly opts: DispatcherOptions,
  ) {
    this.periodic = new Periodic({
      everyMs: opts.pollMs ?? 100,
      firstAfterMs: 0,
      run: () => this.pump(),
      onError: opts.onError,
      scheduler: opts.scheduler,
    });
  }

  start(notifications?: Notifications): this {
    this.unsubscribe = notifications?.subscribe(CHANNELS.notificationsDue, {
      notified: () => this.wake(),
      resync: () => this.wake(),
    });
    this.periodic.start();
    return this;
  }

  async stop(): Promise<void> {
    this.unsubscribe?.();
    await this.periodic.stop();
    await this.running;
  }

  /** Looks now (coalesced with a look in progress). */
  wake(): void {
    void this.pump().catch(this.opts.onError);
  }

  /** Fans out and sends until nothing is due; one pass at a time in this process. */
  pump(): Promise<void> {
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = (async () => {
      try {
        do {
          this.again = false;
          await this.passOnce();
        } while (this.again);
      } finally {
        this.running = undefined;
      }
    })();
    return this.running;
  }

  private async passOnce(): Promise<void> {
    for (;;) {
      while ((await this.repo.fanOut(this.opts.retryScheduleMs[0] ?? 0)) > 0);
      const now = this.opts.now();
      // A lease outlives the attempt's time limit: a claim is retaken only after its process died.
      const lease = new Date(now.getTime() + 2 * this.opts.timeoutMs + 5_000);
      const due = await this.repo.claimDue(now, lease, this.opts.concurrency ?? 64);
      if (!due.length) return;
      const sent = await Promise.all(due.map((m) => this.attempt(m)));
      await this.repo.recordDelivered(
        sent.filter((s) => s.outcome.succeeded),
        now,
      );
    }
  }

  /** One attempt; a failure is recorded at once (with its retry), a success with its batch. */
  private async attempt(m: DueMessage) {
    const at = this.opts.now();
    const secret = m.secret
      ? this.cipher.decrypt(m.secret, m.endpoint_id)
      : await this.secrets.valueOf(m.secret_version_id!);
    const outcome = secret
      ? await this.sender.send({ id: m.id, url: m.url, secret, body: messageBody(m) })
      : {
          succeeded: false,
          statusCode: null,
          latencyMs: 0,
          error: 'the signing secret is gone',
          responseExcerpt: null,
        };
    if (!outcome.succeeded) {
      const delay = nextAttemptDelay(this.opts.retryScheduleMs, m.attempts);
      const retryAt = delay === undefined ? undefined : new Date(this.opts.now().getTime() + delay);
      const { disabled } = await this.repo.recordFailed(m, outcome, at, retryAt, this.opts.disableAfter);
      if (disabled) this.opts.onDisabled?.(m.endpoint_id);
    }
    return { m, outcome };
  }
}
