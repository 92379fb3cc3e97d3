import { Inject, Injectable, Logger, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import pg from 'pg';
import { Backoff } from '../common/retry.js';
import type { Channel } from './channels.js';
import { Database, type Queryable } from './database.js';

/** What a subscriber of a channel is told. */
export interface Subscriber<T> {
  /** A notification: from this process at its commit, from other processes through NOTIFY. */
  notified(payload: T): unknown;
  /**
   * The listener was cut off and is back: notifications may have been missed meanwhile, so the
   * subscriber catches up now (reloads, wakes up) instead of waiting for a poll.
   */
  resync(): unknown;
}

/** Pauses between reconnection attempts: doubling from the first to the last. */
/** How long an own notification's echo is waited for before it is forgotten. */
const ECHO_TTL_MS = 60_000;
/** How the listener shows in pg_stat_activity. */
const LISTENER_APPLICATION_NAME = 'factoryd listener';

interface Topic {
  channel: Channel<any>;
  subscribers: Set<Subscriber<any>>;
}

/**
 * The process's LISTEN/NOTIFY: one dedicated connection LISTENs to every channel someone subscribed
 * to (CHANNELS in channels.ts), whatever the number of subscribers. A lost connection reconnects
 * with a growing pause and then tells every subscriber to resync; nothing it does throws into the
 * process.
 *
 * `publish` NOTIFYs the other processes and tells this process's subscribers itself, at the commit
 * (no round trip through PostgreSQL); the echo of an own NOTIFY is recognised by the sending
 * backend's pid and dropped. An echo that overtakes the answer to its own NOTIFY (outside a
 * transaction, rarely) is delivered a second time: subscribers are idempotent (reload, wake up).
 */
@Injectable()
export class Notifications implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger('Notifications');
  private readonly topics = new Map<string, Topic>();
  /** The listener connection, from the start of its connect until it is lost. */
  private client?: pg.Client;
  private connected = false;
  private readonly listening = new Set<string>();
  /** The LISTEN statements issued so far, one after another (never two queries at once on the client). */
  private listened: Promise<void> = Promise.resolve();
  private stopped = false;
  private retry?: NodeJS.Timeout;
  /** Reconnects 100 ms, then twice as long each time, up to 5 s apart. */
  private readonly reconnects = new Backoff({ firstMs: 100, maxMs: 5000 });
  /** Notifications may have been missed since the listener last listened: resync on the next connection. */
  private gap = false;
  /** Own notifications whose echo has not come back yet: count and time, by pid, channel and payload. */
  private readonly echoes = new Map<string, { count: number; at: number }>();

  constructor(@Inject(Database) private readonly db: Database) {}

  /** The listener's backend pid while it is connected (pg_stat_activity, tests). */
  get backendPid(): number | undefined {
    return this.connected ? (this.client as unknown as { processID?: number }).processID : undefined;
  }

  /** Subscribes to `channel` (LISTENing to it if this is its first subscriber); returns the unsubscribe. */
  subscribe<T>(channel: Channel<T>, subscriber: Subscriber<T>): () => void {
    let topic = this.topics.get(channel.name);
    if (!topic) this.topics.set(channel.name, (topic = { channel, subscribers: new Set() }));
    topic.subscribers.add(subscriber);
    void this.listenToAll();
    return () => topic.subscribers.delete(subscriber);
  }

  /**
   * Announces `payload` on `channel` through `q`: inside a transaction the NOTIFY goes out with its
   * commit (never on a rollback) and this process's subscribers hear it right after the COMMIT;
   * outside one, this process's subscribers hear it at once, even if the NOTIFY then fails.
   * A NOTIFY in a transaction serialises commits: never publish once per delivery or per run on a
   * hot path; coalesce.
   */
  async publish<T>(channel: Channel<T>, payload: T, q: Queryable = this.db): Promise<void> {
    const raw = channel.encode(payload);
    q.afterCommit(() => this.deliver(channel.name, raw));
    const [row] = await q.query<{ pid: number }>(`SELECT pg_backend_pid() AS pid FROM pg_notify($1, $2)`, [
      channel.name,
      raw,
    ]);
    if (row && this.topics.has(channel.name)) this.expectEcho(`${row.pid}\n${channel.name}\n${raw}`);
  }

  async onModuleInit(): Promise<void> {
    await this.start();
  }

  async onApplicationShutdown(): Promise<void> {
    await this.stop();
  }

  /** Connects the listener; a failure is logged and retried, never thrown. */
  async start(): Promise<void> {
    if (this.stopped || this.client) return;
    const client = new pg.Client({ ...this.db.pool.options, application_name: LISTENER_APPLICATION_NAME });
    this.client = client;
    client.on('error', (err) => this.lost(client, err));
    client.on('end', () => this.lost(client));
    client.on('notification', (n) => this.received(n));
    try {
      await client.connect();
    } catch (err) {
      this.lost(client, err);
      return;
    }
    if (this.client !== client) return;
    this.connected = true;
    await this.listenToAll();
    if (this.client !== client) return;
    this.reconnects.reset();
    if (this.gap) {
      this.gap = false;
      this.resyncAll();
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.retry);
    const client = this.client;
    this.client = undefined;
    this.connected = false;
    await client?.end().catch(() => undefined);
  }

  /** LISTENs to every subscribed channel the connection does not listen to yet (one LISTEN at a time). */
  private listenToAll(): Promise<void> {
    this.listened = this.listened.then(() => this.listenToMissing());
    return this.listened;
  }

  private async listenToMissing(): Promise<void> {
    const client = this.client;
    if (!client || !this.connected) return;
    const missing = [...this.topics.keys()].filter((name) => !this.listening.has(name));
    if (!missing.length) return;
    for (const name of missing) this.listening.add(name);
    try {
      // Names are checked plain identifiers (channels.ts).
      await client.query(missing.map((name) => `LISTEN ${name}`).join('; '));
    } catch (err) {
      this.lost(client, err);
    }
  }

  private lost(client: pg.Client, err?: unknown): void {
    if (this.client !== client) return;
    this.client = undefined;
    this.connected = false;
    this.listening.clear();
    // Notifications sent from now on are not heard; echoes waited for will not come.
    this.gap = true;
    this.echoes.clear();
    client.end().catch(() => undefined);
    if (this.stopped) return;
    const reason = err instanceof Error ? err.message : 'the connection ended';
    const pause = this.reconnects.next();
    this.logger.warn(`the LISTEN connection was lost (${reason}); reconnecting in ${pause} ms`);
    this.retry = setTimeout(() => void this.start(), pause);
    this.retry.unref();
  }

  private received(n: pg.Notification): void {
    const raw = n.payload ?? '';
    if (this.takeEcho(`${n.processId}\n${n.channel}\n${raw}`)) return;
    this.deliver(n.channel, raw);
  }

  private deliver(name: string, raw: string): void {
    const topic = this.topics.get(name);
    if (!topic) return;
    let payload: unknown;
    try {
      payload = topic.channel.decode(raw);
    } catch (err) {
      this.logger.warn(`a notification on ${name} was dropped: ${(err as Error).message}`);
      return;
    }
    for (const s of topic.subscribers) this.call(name, () => s.notified(payload));
  }

  private resyncAll(): void {
    for (const [name, topic] of this.topics)
      for (const s of topic.subscribers) this.call(name, () => s.resync());
  }

  /** A subscriber's failure is its own: logged, never thrown into the listener. */
  private call(name: string, fn: () => unknown): void {
    const failed = (err: unknown) => this.logger.error({ err }, `a subscriber of ${name} failed`);
    try {
      const out = fn();
      if (out instanceof Promise) out.catch(failed);
    } catch (err) {
      failed(err);
    }
  }

  private expectEcho(key: string): void {
    const now = Date.now();
    for (const [k, e] of this.echoes) if (now - e.at > ECHO_TTL_MS) this.echoes.delete(k);
    const e = this.echoes.get(key);
    this.echoes.set(key, { count: (e?.count ?? 0) + 1, at: now });
  }

  private takeEcho(key: string): boolean {
    const e = this.echoes.get(key);
    if (!e) return false;
    if (--e.count === 0) this.echoes.delete(key);
    return true;
  }
}
