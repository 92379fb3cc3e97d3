import { Global, Injectable, Module } from '@nestjs/common';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/**
 * The Prometheus registry at /metrics and every metric factoryd exports (docs/metrics.md says what
 * each means). Counters and histograms count what happens in this process, where it happens (a claim,
 * a reap, a reconcile, a delivery, a notification attempt, a harness start); the depth gauges are read
 * from PostgreSQL at scrape time by the modules that own the tables (addDepthReader), the same on
 * every replica. Labels take a few fixed values only: never a run, team, webhook or endpoint id.
 */
@Injectable()
export class Metrics {
  readonly registry = new Registry();
  /** The depth gauges: in a scrape's answer only when they were read for it. */
  private readonly depthRegistry = new Registry();

  readonly httpDuration = new Histogram({
    name: 'factoryd_http_request_duration_seconds',
    help: 'HTTP requests by route and status',
    labelNames: ['method', 'route', 'status'],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [this.registry],
  });
  readonly claimWait = new Histogram({
    name: 'factoryd_run_claim_wait_seconds',
    help: 'Time a run waited QUEUED before a worker claimed it, by where it runs',
    labelNames: ['workers'],
    buckets: [0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600],
    registers: [this.registry],
  });

  // Counted by this process.
  readonly runsClaimed = this.counter('runs_claimed_total', 'Runs claimed through this process', ['workers']);
  readonly runsReaped = this.counter('runs_reaped_total', 'Held runs the reaper ended, by why', ['reason']);
  readonly harnessStarts = this.counter('harness_starts_total', 'Harness starts', ['harness', 'outcome']);
  readonly reconciles = this.counter('reconciles_total', 'Reconcile passes', ['result', 'reason']);
  readonly deliveries = this.counter('webhook_deliveries_total', 'Webhook deliveries by status', ['status']);
  readonly notificationAttempts = this.counter('notification_attempts_total', 'Notification attempts', [
    'outcome',
  ]);

  /** What a worker pool and a dispatcher call with each harness start and each attempt (bound). */
  readonly countHarnessStart = (harness: string, outcome: string) =>
    this.harnessStarts.inc({ harness, outcome });
  readonly countNotificationAttempt = (outcome: string) => this.notificationAttempts.inc({ outcome });

  // Read from PostgreSQL at scrape time: the same on every replica.
  readonly runsByState = this.depth('runs', 'Live runs by state and where they run', ['state', 'workers']);
  readonly runsOverdue = this.depth('runs_overdue', 'Held runs the reaper has yet to end', ['reason']);
  readonly messagesPending = this.depth('notification_messages_pending', 'Messages waiting for an attempt');
  /** Shown from the first depth reader on: a process that reads no depth has nothing to say of them. */
  readonly depthsUp = new Gauge({
    name: 'factoryd_metrics_database_up',
    help: '1 when this scrape read the depths from PostgreSQL, 0 when it could not (they are then absent)',
    registers: [],
  });

  private counter<L extends string>(name: string, help: string, labels: L[]): Counter<L> {
    return new Counter({ name: `factoryd_${name}`, help, labelNames: labels, registers: [this.registry] });
  }

  /** A depth gauge, in the answer once a reader sets it (addDepthReader): never a 0 nobody read. */
  private depth<L extends string>(name: string, help: string, labels: L[] = []): Gauge<L> {
    return new Gauge({ name: `factoryd_${name}`, help, labelNames: labels, registers: [] });
  }

  private readonly depthReaders: DepthReader[] = [];
  private reading?: Promise<boolean>;

  constructor() {
    collectDefaultMetrics({ register: this.registry, prefix: 'factoryd_' });
  }

  /**
   * A module that owns a depth's table reads it at every scrape and sets `gauges`, which are in the
   * answer from then on (a process that runs no such module, a dispatcher alone say, shows none).
   */
  addDepthReader(read: DepthReader, gauges: Gauge[]): void {
    if (!this.depthReaders.length) this.registry.registerMetric(this.depthsUp);
    for (const gauge of gauges) this.depthRegistry.registerMetric(gauge);
    this.depthReaders.push(read);
  }

  /**
   * The text a scrape answers: every metric, and the depths read from PostgreSQL for it. At most `ms`
   * is waited for them: a database that fails or does not answer in time leaves the depth gauges out
   * of the answer (absent, not stale) and `depthsUp` at 0; a read still under way is not started again,
   * so scrapes never pile up on a database that hangs.
   */
  async scrape(ms: number): Promise<string> {
    if (!this.depthReaders.length) return this.registry.metrics();
    this.reading ??= Promise.all(this.depthReaders.map((read) => read())).then(
      () => true,
      () => false,
    );
    const reading = this.reading;
    void reading.finally(() => {
      if (this.reading === reading) this.reading = undefined;
    });
    let timer: NodeJS.Timeout | undefined;
    const read = await Promise.race([
      reading,
      new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms))),
    ]);
    clearTimeout(timer);
    this.depthsUp.set(read ? 1 : 0);
    return (await this.registry.metrics()) + (read ? await this.depthRegistry.metrics() : '');
  }
}

/** Metrics for every module that counts, from wherever the process composes them (`serve`, `factoryd worker`). */
@Global()
@Module({ providers: [Metrics], exports: [Metrics] })
export class MetricsModule {}

/** How long a scrape waits for the depths from PostgreSQL before it answers without them. */
export const SCRAPE_DEPTHS_MS = 2000;

/** The content type of a scrape's answer: Prometheus's text format. */
export const PROMETHEUS_TEXT = 'text/plain; version=0.0.4; charset=utf-8';

/**
 * A depth read stops after this long, waiting for a lock included (Database.queryWithin): a scrape
 * answers without it after 2 s, and the next one may read again once it has ended.
 */
export const DEPTH_READ = { ms: 5000, tooLong: 'Reading the depths for /metrics took longer than 5 s.' };

/** A depth is counted up to this many rows, so that a scrape's cost stays bounded whatever the backlog. */
export const DEPTH_CAP = 100_000;

/** Reads one module's depths from the database and sets its gauges; rejects when it cannot. */
export type DepthReader = () => Promise<void>;
