import { Injectable } from '@nestjs/common';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/**
 * The Prometheus registry at /metrics and every metric factoryd exports (docs/metrics.md lists them).
 * Counters and histograms count what happens in this process, where it happens (a claim, a reap, a
 * reconcile, a delivery, a notification attempt, a harness start); the gauges are the queue's and the
 * outbox's depths, read from PostgreSQL at scrape time (ops/queue-depths.repository.ts) and the same
 * on every replica. Labels take a few fixed values only: never a run, team, webhook or endpoint id.
 */
@Injectable()
export class Metrics {
  readonly registry = new Registry();
  private readonly registers = [this.registry];
  /** The depth gauges: in a scrape's answer only when they were read for it. */
  private readonly depthRegistry = new Registry();

  readonly httpDuration = new Histogram({
    name: 'factoryd_http_request_duration_seconds',
    help: 'HTTP requests by route and status',
    labelNames: ['method', 'route', 'status'],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: this.registers,
  });

  // ---- the run queue ---------------------------------------------------------------------------
  readonly runsClaimed = new Counter({
    name: 'factoryd_runs_claimed_total',
    help: 'Runs claimed by workers through this process, by where they run (service or self_hosted)',
    labelNames: ['workers'],
    registers: this.registers,
  });
  readonly claimWait = new Histogram({
    name: 'factoryd_run_claim_wait_seconds',
    help: 'Time a run waited QUEUED before a worker claimed it, by where it runs',
    labelNames: ['workers'],
    buckets: [0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600],
    registers: this.registers,
  });
  readonly runsReaped = new Counter({
    name: 'factoryd_runs_reaped_total',
    help: 'Held runs the service took from their workers and ended, by why (lease_lapsed, overdue, worker_lost)',
    labelNames: ['reason'],
    registers: this.registers,
  });
  readonly harnessStarts = new Counter({
    name: 'factoryd_harness_starts_total',
    help: "Harness starts by this process's service-hosted workers, by harness type and outcome",
    labelNames: ['harness', 'outcome'],
    registers: this.registers,
  });

  // ---- definitions, deliveries, notifications ----------------------------------------------------
  readonly reconciles = new Counter({
    name: 'factoryd_reconciles_total',
    help: 'Reconcile passes run by this process, by result and reason',
    labelNames: ['result', 'reason'],
    registers: this.registers,
  });
  readonly deliveries = new Counter({
    name: 'factoryd_webhook_deliveries_total',
    help: 'Webhook deliveries answered by this process, by the status they were logged with (or rate_limited)',
    labelNames: ['status'],
    registers: this.registers,
  });
  readonly notificationAttempts = new Counter({
    name: 'factoryd_notification_attempts_total',
    help: "Notification attempts by this process's dispatcher, by outcome (delivered, retrying, failed)",
    labelNames: ['outcome'],
    registers: this.registers,
  });

  // ---- depths, read from PostgreSQL at scrape time -------------------------------------------------
  readonly runsByState = new Gauge({
    name: 'factoryd_runs',
    help: 'Live runs (QUEUED, CLAIMED, INPROGRESS, BLOCKED) by state and where they run; the same on every replica',
    labelNames: ['state', 'workers'],
    registers: [this.depthRegistry],
  });
  readonly runsOverdue = new Gauge({
    name: 'factoryd_runs_overdue',
    help: 'Held runs the reaper has yet to end, by why (lease_lapsed, overdue)',
    labelNames: ['reason'],
    registers: [this.depthRegistry],
  });
  readonly outboxDepth = new Gauge({
    name: 'factoryd_notification_outbox_events',
    help: 'Events in the notification outbox not yet fanned out to endpoints',
    registers: [this.depthRegistry],
  });
  readonly messagesPending = new Gauge({
    name: 'factoryd_notification_messages_pending',
    help: 'Notification messages waiting for a (first or further) attempt',
    registers: [this.depthRegistry],
  });
  readonly depthsUp = new Gauge({
    name: 'factoryd_metrics_database_up',
    help: '1 when the last scrape read the depths from PostgreSQL, 0 when it could not (the depth gauges are then absent)',
    registers: this.registers,
  });

  private readonly depthReaders: DepthReader[] = [];
  private reading?: Promise<boolean>;

  constructor() {
    collectDefaultMetrics({ register: this.registry, prefix: 'factoryd_' });
  }

  /** A module that owns a depth's table reads it at every scrape (it sets its own gauges). */
  addDepthReader(read: DepthReader): void {
    this.depthReaders.push(read);
  }

  /**
   * The text a scrape answers: every metric, and the depths read from PostgreSQL for it. At most `ms`
   * is waited for them: a database that fails or does not answer in time leaves the depth gauges out
   * of the answer (absent, not stale) and `depthsUp` at 0; a read still under way is not started again,
   * so scrapes never pile up on a database that hangs.
   */
  async scrape(ms: number): Promise<string> {
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

/** A depth is counted up to this many rows, so that a scrape's cost stays bounded whatever the backlog. */
export const DEPTH_CAP = 100_000;

/** Reads one module's depths from the database and sets its gauges; rejects when it cannot. */
export type DepthReader = () => Promise<void>;
