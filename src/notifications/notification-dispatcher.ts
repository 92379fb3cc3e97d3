import { randomUUID } from 'node:crypto';
import type { Notifications } from '../database/notifications.js';
import { CHANNELS } from '../database/channels.js';
import { Batcher } from '../common/batcher.js';
import { groupBy } from '../common/group-by.js';
import { Periodic, type Scheduler } from '../common/periodic.js';
import type { SecretCipher } from '../secrets/secret-cipher.js';
import type { SecretsService } from '../secrets/secrets.service.js';
import { nextAttemptDelay, receiverFailing } from './notification-policy.js';
import type { NotificationSender } from './notification-sender.js';
import type {
  AttemptRecord,
  DueMessage,
  EndpointOutcome,
  NotificationsRepository,
} from './notifications.repository.js';
import { messageBody } from './notification-endpoints.service.js';

export interface DispatcherOptions {
  retryScheduleMs: readonly number[];
  disableAfter: number;
  timeoutMs: number;
  now: () => Date;
  /** How often the due messages are looked at (ms). */
  pollMs?: number;
  /** Messages claimed at once in this process (attempts in flight, or waiting for their turn). */
  concurrency?: number;
  /** Messages of one endpoint claimed at once. */
  perEndpoint?: number;
  /** Attempts in flight to one endpoint at once (its connections). */
  connectionsPerEndpoint?: number;
  /** How long an endpoint may go without delivering here before its next round begins with a probe (ms). */
  probeAfterIdleMs?: number;
  scheduler?: Scheduler;
  onError: (err: unknown) => void;
  onDisabled?: (endpointId: string) => void;
  /** Each attempt's outcome (`retrying`: failed, with a retry to come; `failed`: given up): for metrics. */
  onAttempt?: (outcome: 'delivered' | 'retrying' | 'failed') => void;
}

/** What one statement records at most: endpoint outcomes, and their attempts (one outcome always goes). */
const RECORD_BATCH = 32;
const RECORD_ATTEMPTS = 4096;
/** How long an endpoint's claimed messages should take to send, at its latest answer time. */
const ROUND_TARGET_MS = 1_000;
/** Endpoints remembered at most in each of the dispatcher's maps (beyond, the oldest are forgotten). */
const MAX_REMEMBERED = 10_000;
/** An endpoint that has not delivered here for this long gets a probe first (see `round`). */
const PROBE_AFTER_IDLE_MS = 10_000;

/** Sets (or with undefined, forgets) an endpoint's entry, the map bounded by MAX_REMEMBERED. */
function remember<T>(map: Map<string, T>, endpointId: string, value: T | undefined): void {
  map.delete(endpointId);
  if (value === undefined) return;
  if (map.size >= MAX_REMEMBERED) map.delete(map.keys().next().value!);
  map.set(endpointId, value);
}

/**
 * Sends notifications: claims due messages (made by the state changes' own transactions, one per
 * subscribed endpoint) endpoint by endpoint (the endpoint leased, SKIP LOCKED: any number of
 * dispatchers), POSTs each signed, and records the attempts, their retries, given-up messages and
 * disabled endpoints (docs/notifications.md).
 *
 * What an endpoint may cost the process is bounded, whatever it does. An endpoint's claimed messages
 * go `connectionsPerEndpoint` at a time, a run's messages one after another in event order (see
 * `round`); one that has not delivered here lately gets its first message alone first. Once an
 * attempt fails as the receiver's fault (no answer, a 5xx…; not a 400, 409, 413, 415 or 422, which
 * refuse that one message), no more start: the rest are held back unattempted, and if nothing was
 * delivered the endpoint is failing: not tried again before its oldest message's retry, and then with
 * that message alone. An endpoint that answers slowly is claimed fewer messages next time (what its
 * connections send in about a second at its latest answer time), and a round stops starting attempts
 * once it has taken `timeoutMs`: so its lease (twice that, and a margin) outlives it. Attempts are
 * recorded by a group commit (one statement for every endpoint whose attempts ended meanwhile, one
 * statement at a time), never per attempt. At most `concurrency` messages are claimed at once, and
 * no database connection is held while an answer is awaited, so a receiver that never answers holds
 * a claim and a connection of its own, not one of the pool. After failures the next look waits for
 * the poll; after a delivery it comes at once.
 *
 * Due messages are polled (every `pollMs`) rather than announced: a NOTIFY per state change would
 * serialise the commits of runs and deliveries (a NOTIFY in a transaction takes a global lock at
 * commit). Resends and re-enabled endpoints are announced on CHANNELS.notificationsDue.
 */
export class NotificationDispatcher {
  private readonly periodic: Periodic;
  private readonly records: Batcher<EndpointOutcome, boolean>;
  private running?: Promise<void>;
  private again = false;
  /** The first attempt's pause written where the triggers read it (at the first pass). */
  private settingsWritten = false;
  /** Stopping: no new claims (a delivery's look-again included), the ones in flight finish. */
  private stopping = false;
  private unsubscribe?: () => void;
  /** Messages claimed by this process and not recorded yet. */
  private claimed = 0;
  private readonly sending = new Set<Promise<void>>();
  /** Endpoints that answered slowly, and the messages to claim of each next time. */
  private readonly lowered = new Map<string, number>();
  /** When endpoints last delivered in this process (performance.now()). */
  private readonly delivered = new Map<string, number>();

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
    this.records = new Batcher(
      async (outcomes) => {
        const disabled = new Set(await this.repo.recordAttempts(outcomes, this.opts.disableAfter));
        return outcomes.map((o) => ({ status: 'fulfilled', value: disabled.has(o.endpointId) }));
      },
      {
        concurrency: 1,
        maxItems: RECORD_BATCH,
        maxWeight: RECORD_ATTEMPTS,
        weigh: (o) => o.attempts.length,
      },
    );
  }

  private get perEndpoint(): number {
    return this.opts.perEndpoint ?? 1024;
  }

  private get connections(): number {
    return this.opts.connectionsPerEndpoint ?? 32;
  }

  start(notifications?: Notifications): this {
    this.stopping = false;
    this.unsubscribe = notifications?.subscribe(CHANNELS.notificationsDue, {
      notified: () => this.wake(),
      resync: () => this.wake(),
    });
    this.periodic.start();
    return this;
  }

  async stop(): Promise<void> {
    this.stopping = true;
    this.unsubscribe?.();
    await this.periodic.stop();
    await this.running;
    await this.settled();
    this.sender.closeIdle(true);
  }

  /** Resolves once every claimed message of this process has been attempted and recorded. */
  async settled(): Promise<void> {
    while (this.sending.size) await Promise.all(this.sending);
  }

  /** Looks now (coalesced with a look in progress). */
  wake(): void {
    void this.pump().catch(this.opts.onError);
  }

  /**
   * Claims until nothing more is due or the claims are at `concurrency`; one pass at a time in this
   * process. The attempts go on after it returns (see `settled`).
   */
  pump(): Promise<void> {
    if (this.stopping) return Promise.resolve();
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = (async () => {
      try {
        do {
          this.again = false;
          await this.passOnce();
        } while (this.again && !this.stopping);
      } finally {
        this.running = undefined;
      }
    })();
    return this.running;
  }

  private async passOnce(): Promise<void> {
    if (!this.settingsWritten) {
      // Read by the triggers that make messages, in whichever process changes a run.
      await this.repo.setFirstAttemptDelay(this.opts.retryScheduleMs[0] ?? 0);
      this.settingsWritten = true;
    }
    this.sender.closeIdle();
    for (;;) {
      const room = (this.opts.concurrency ?? 4096) - this.claimed;
      if (room <= 0) return;
      const now = this.opts.now();
      // The endpoint's lease outlives its round: attempts start for at most `timeoutMs`, and the last
      // one started may take as long again; then the record. A claim is retaken only after its
      // process died.
      const lease = new Date(now.getTime() + 2 * this.opts.timeoutMs + 5_000);
      // Its records apply only while the endpoint is under this claim (a record after another
      // dispatcher took it over changes nothing of that one's).
      const claimId = randomUUID();
      const due = await this.repo.claimDue(now, lease, claimId, room, this.perEndpoint, this.lowered);
      if (!due.length) return;
      this.claimed += due.length;
      // Per endpoint, in event order.
      for (const group of groupBy(due, (m) => m.endpoint_id).values()) {
        const sending: Promise<void> = this.send(group, claimId)
          .catch(this.opts.onError)
          .finally(() => this.sending.delete(sending));
        this.sending.add(sending);
      }
      // Fewer than asked for: all that is due now is claimed. Asking again at once would race the
      // attempts just started (one that ended meanwhile frees its endpoint for its next message);
      // what they free goes at the next look, as it would had they taken a moment longer.
      if (due.length < room) return;
    }
  }

  /** One endpoint's claimed messages: a round (see `round`), then recorded. */
  private async send(group: DueMessage[], claimId: string): Promise<void> {
    try {
      const [first] = group as [DueMessage, ...DueMessage[]];
      const attempts = await this.round(group, await this.secretOf(first));
      const at = this.opts.now();
      const taking = attempts.some((a) => a.outcome.succeeded || !receiverFailing(a.outcome.statusCode));
      const delivered = attempts.some((a) => a.outcome.succeeded);
      // The oldest message's attempt: the first to start (the lowest event; its run's chain comes first).
      const oldest = attempts.find((a) => a.m.id === first.id)!;
      this.pace(first.endpoint_id, attempts, delivered);
      const disabled = await this.records.submit({
        endpointId: first.endpoint_id,
        attempts,
        failingSince: taking ? undefined : (first.failing_since ?? oldest.at),
        // A failing endpoint is tried again when its oldest message's retry is due; once that message
        // is given up, the next one goes at the next look.
        heldUntil: taking ? at : (oldest.retryAt ?? at),
        claimId,
      });
      if (disabled) this.opts.onDisabled?.(first.endpoint_id);
      // The endpoint is free again and may have more; after a failure the next poll looks (a pause).
      if (delivered) this.wake();
    } finally {
      this.claimed -= group.length;
    }
  }

  /**
   * A round: the claimed messages, `connectionsPerEndpoint` attempts at a time, each run's messages one
   * after another in event order (a run whose message failed sends no later one: in order per run),
   * other messages side by side. An endpoint that has not delivered here lately gets its first message
   * alone first, as a probe: a receiver that is down costs one attempt, not one per connection. No
   * attempt starts once one failed as the receiver's fault (no answer, a 5xx…), nor once the round has
   * taken `timeoutMs`; what is left stays pending, unattempted (held back), for a later round.
   */
  private async round(group: DueMessage[], secret: string | undefined): Promise<AttemptRecord[]> {
    const started = performance.now();
    const attempts: AttemptRecord[] = [];
    let receiverDown = false;
    const failedRuns = new Set<string>();
    const go = async (m: DueMessage): Promise<boolean> => {
      const a = await this.attempt(m, secret);
      attempts.push(a);
      if (a.outcome.succeeded) return true;
      if (receiverFailing(a.outcome.statusCode)) receiverDown = true;
      if (m.run_id) failedRuns.add(m.run_id);
      return false;
    };
    const probe = !this.deliveredLately(group[0]!.endpoint_id);
    if (probe) await go(group[0]!);
    const chains = [...groupBy(probe ? group.slice(1) : group, (m) => m.run_id ?? m.id).values()];
    const lane = async () => {
      for (let chain = chains.shift(); chain; chain = chains.shift())
        for (const m of chain) {
          const late = performance.now() - started > this.opts.timeoutMs;
          if (receiverDown || late || (m.run_id && failedRuns.has(m.run_id)) || !(await go(m))) break;
        }
    };
    await Promise.all(Array.from({ length: Math.min(this.connections, chains.length) }, lane));
    return attempts;
  }

  /**
   * Remembers what the round says of the endpoint: when it last delivered here (so that its next round
   * needs no probe), and the next claim of an endpoint that answers slowly, lowered to what its
   * connections send in about ROUND_TARGET_MS at its mean answer time (never below one message per
   * connection): a slow receiver holds few claims, and its rounds stay short. A fast one gets
   * `perEndpoint` again.
   */
  private pace(endpointId: string, attempts: AttemptRecord[], delivered: boolean): void {
    const mean = attempts.reduce((sum, a) => sum + a.outcome.latencyMs, 0) / attempts.length;
    const claim = Math.max(
      this.connections,
      Math.floor((this.connections * ROUND_TARGET_MS) / Math.max(mean, 1)),
    );
    remember(this.lowered, endpointId, claim < this.perEndpoint ? claim : undefined);
    remember(this.delivered, endpointId, delivered ? performance.now() : undefined);
  }

  private deliveredLately(endpointId: string): boolean {
    const window = this.opts.probeAfterIdleMs ?? PROBE_AFTER_IDLE_MS;
    return performance.now() - (this.delivered.get(endpointId) ?? -Infinity) < window;
  }

  /** The group's signing secret (its endpoint's own, or the team secret its factory file pinned). */
  private async secretOf(m: DueMessage): Promise<string | undefined> {
    return m.secret
      ? this.cipher.decrypt(m.secret, m.endpoint_id)
      : await this.secrets.valueOf(m.secret_version_id!);
  }

  /** One attempt; a failed one carries its retry (none once the schedule is spent). */
  private async attempt(m: DueMessage, secret: string | undefined): Promise<AttemptRecord> {
    const at = this.opts.now();
    const outcome = secret
      ? await this.sender.send({
          id: m.id,
          endpointId: m.endpoint_id,
          url: m.url,
          secret,
          body: messageBody(m),
        })
      : {
          succeeded: false,
          statusCode: null,
          latencyMs: 0,
          error: 'the signing secret is gone',
          responseExcerpt: null,
        };
    if (outcome.succeeded) {
      this.opts.onAttempt?.('delivered');
      return { m, outcome, at };
    }
    // `attempts` counts the attempts recorded before this one.
    const delay = nextAttemptDelay(this.opts.retryScheduleMs, m.attempts + 1);
    this.opts.onAttempt?.(delay === undefined ? 'failed' : 'retrying');
    return {
      m,
      outcome,
      at,
      retryAt: delay === undefined ? undefined : new Date(this.opts.now().getTime() + delay),
    };
  }
}
