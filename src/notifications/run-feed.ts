import { Inject, Injectable, Logger, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { CHANNELS } from '../database/channels.js';
import { Notifications } from '../database/notifications.js';
import {
  PAGE,
  RunActivityRepository,
  type ConversationEvent,
  type StateChange,
} from './run-activity.repository.js';

/** Someone watching: a team's runs, or one run (its conversation events too). */
export interface FeedWatcher {
  teamId: string;
  runId?: string;
  changes(changes: StateChange[]): void;
  events?(events: ConversationEvent[]): void;
}

/**
 * How long an id below the newest one read may stay missing before the reader stops waiting for it:
 * a transaction that took the id and has not committed yet (it commits late) — or one that rolled
 * back (the id never comes).
 */
const HOLE_WAIT_MS = 2000;
/** How soon the reader looks again while it waits for a missing id. */
const HOLE_POLL_MS = 100;

/**
 * The process's one reader of what runs do, fanned out to every open stream: on each runChanged
 * notification it reads the state changes since its cursor (and, for the runs someone watches, their
 * new conversation events) with one query each, and hands each watcher its team's share in memory.
 * No stream queries the database for live news.
 *
 * State-change ids come from one sequence and can commit out of order (two runs changing at once):
 * the cursor stays below an id not seen yet until it arrives or HOLE_WAIT_MS passes, and ids seen
 * above the cursor are remembered so that nothing is sent twice. A run's own changes and events are
 * written in order (its row lock, its worker), so each watched run keeps a plain cursor.
 */
@Injectable()
export class RunFeed implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger('RunFeed');
  private readonly watchers = new Set<FeedWatcher>();
  /** Every change id up to this one has been read (or given up on). */
  private cursor?: number;
  /** Ids read above the cursor, and when each missing id was first noticed. */
  private readonly seen = new Set<number>();
  private readonly holes = new Map<number, number>();
  /** Per watched run: its newest conversation event read, and how many watchers. */
  private readonly runs = new Map<string, { after: number; watchers: number }>();
  private reading?: Promise<void>;
  private again = false;
  private holeTimer?: NodeJS.Timeout;
  private unsubscribe?: () => void;

  constructor(
    @Inject(Notifications) private readonly notifications: Notifications,
    @Inject(RunActivityRepository) private readonly activity: RunActivityRepository,
  ) {}

  onModuleInit(): void {
    const read = () => this.read();
    this.unsubscribe = this.notifications.subscribe(CHANNELS.runChanged, { notified: read, resync: read });
  }

  onApplicationShutdown(): void {
    this.unsubscribe?.();
    clearTimeout(this.holeTimer);
  }

  get size(): number {
    return this.watchers.size;
  }

  /**
   * Starts feeding `w` from now on; a run watcher's events from `eventsAfter`. Resolves once the
   * feed's cursor is set (`from`: only changes above it come live), so that what the caller then
   * replays from the database overlaps the live part (watchers drop what they already sent by id).
   */
  async watch(w: FeedWatcher, eventsAfter = 0): Promise<{ unwatch: () => void; from: number }> {
    this.watchers.add(w);
    if (w.runId) {
      const run = this.runs.get(w.runId);
      if (run) {
        run.watchers++;
        run.after = Math.min(run.after, eventsAfter);
      } else this.runs.set(w.runId, { after: eventsAfter, watchers: 1 });
    }
    if (this.cursor === undefined) {
      try {
        const last = await this.activity.lastChangeId();
        this.cursor ??= last;
      } catch (err) {
        this.unwatch(w);
        throw err;
      }
    }
    // Only changes above `from` reach the watcher live.
    return { unwatch: () => this.unwatch(w), from: this.cursor };
  }

  private unwatch(w: FeedWatcher): void {
    if (!this.watchers.delete(w) || !w.runId) return;
    const run = this.runs.get(w.runId);
    if (run && --run.watchers === 0) this.runs.delete(w.runId);
    if (!this.watchers.size) this.reset();
  }

  /** Nobody watches: forget the cursor (the next watcher starts from the newest change). */
  private reset(): void {
    this.cursor = undefined;
    this.seen.clear();
    this.holes.clear();
  }

  /** Reads what is new; one read at a time, and one more if news came meanwhile. */
  read(): Promise<void> {
    if (this.reading) {
      this.again = true;
      return this.reading;
    }
    this.reading = (async () => {
      do {
        this.again = false;
        try {
          await this.readOnce();
        } catch (err) {
          this.logger.warn(`reading run changes failed: ${(err as Error).message}`);
        }
      } while (this.again);
    })().finally(() => (this.reading = undefined));
    return this.reading;
  }

  private async readOnce(): Promise<void> {
    if (!this.watchers.size || this.cursor === undefined) return;
    // From the cursor (below any missing id), paging on: rows read before are skipped by `seen`.
    let after = this.cursor;
    let page: StateChange[];
    do {
      page = await this.activity.changesAfter(after);
      const fresh = page.filter((c) => !this.seen.has(c.id));
      for (const c of fresh) this.seen.add(c.id);
      if (page.length) after = page[page.length - 1]!.id;
      if (fresh.length) this.fanOutChanges(fresh);
    } while (page.length === PAGE);
    this.advance(after);
    if (this.runs.size) {
      let events: ConversationEvent[];
      do {
        events = await this.activity.eventsAfter(new Map([...this.runs].map(([id, r]) => [id, r.after])));
        for (const e of events) {
          const run = this.runs.get(e.run_id);
          if (run && e.id > run.after) run.after = e.id;
        }
        if (events.length) this.fanOutEvents(events);
      } while (events.length >= PAGE);
    }
  }

  /** Moves the cursor over every id read, and over missing ones waited for long enough. */
  private advance(newest: number): void {
    if (this.cursor === undefined) return; // every watcher left meanwhile
    const now = Date.now();
    for (let id = this.cursor! + 1; id <= newest; id++) {
      if (this.seen.delete(id)) this.holes.delete(id);
      else {
        const since = this.holes.get(id) ?? now;
        this.holes.set(id, since);
        if (now - since < HOLE_WAIT_MS) break;
        this.holes.delete(id);
      }
      this.cursor = id;
    }
    if (this.holes.size && !this.holeTimer) {
      this.holeTimer = setTimeout(() => {
        this.holeTimer = undefined;
        void this.read();
      }, HOLE_POLL_MS);
      this.holeTimer.unref();
    }
  }

  private fanOutChanges(changes: StateChange[]): void {
    const byTeam = new Map<string, StateChange[]>();
    for (const c of changes) {
      const list = byTeam.get(c.team_id);
      if (list) list.push(c);
      else byTeam.set(c.team_id, [c]);
    }
    for (const w of this.watchers) {
      const mine = byTeam.get(w.teamId);
      if (!mine) continue;
      const share = w.runId ? mine.filter((c) => c.run_id === w.runId) : mine;
      if (share.length) this.tell(() => w.changes(share));
    }
  }

  private fanOutEvents(events: ConversationEvent[]): void {
    for (const w of this.watchers) {
      if (!w.runId || !w.events) continue;
      const share = events.filter((e) => e.run_id === w.runId);
      if (share.length) this.tell(() => w.events!(share));
    }
  }

  /** A watcher's failure is its own. */
  private tell(fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.logger.warn(`a run stream failed: ${(err as Error).message}`);
    }
  }
}
