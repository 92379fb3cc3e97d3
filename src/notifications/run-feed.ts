import { Inject, Injectable, Logger, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { addToGroup, groupBy } from '../common/group-by.js';
import { CHANNELS } from '../database/channels.js';
import type { Queryable } from '../database/database.js';
import { Notifications } from '../database/notifications.js';
import {
  PAGE,
  RunActivityRepository,
  type ConversationEvent,
  type SkippedChange,
  type StateChange,
} from './run-activity.repository.js';

/** Someone watching: a team's runs, or one run (its conversation events too). */
export interface FeedWatcher {
  teamId: string;
  runId?: string;
  /**
   * What is new: the team's state changes (a team watcher); or the run's state changes together with
   * its conversation events read in the same snapshot (a run watcher), so that the events written
   * with a change come with it — a run's end never arrives ahead of its last messages.
   */
  news(changes: StateChange[], events: ConversationEvent[]): void;
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
 * No stream queries the database for live news. Both are read in one snapshot and a run's watchers get
 * its changes and events together: a report written as one statement (messages and the run's end)
 * arrives as one piece, never its end first.
 *
 * State-change ids come from one sequence and can commit out of order (two runs changing at once):
 * the cursor stays below an id not seen yet until it arrives or HOLE_WAIT_MS passes, and ids seen
 * above the cursor are remembered so that nothing is sent twice. A run's own changes and events are
 * written in order (its row lock, its worker), so each watched run keeps a plain cursor.
 */
@Injectable()
export class RunFeed implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger('RunFeed');
  /** The watchers by team, and the watchers of each watched run: a change reaches only its team's. */
  private readonly teams = new Map<string, Set<FeedWatcher>>();
  private watching = 0;
  /** Every change id up to this one has been read (or given up on). */
  private cursor?: number;
  /** Ids read above the cursor, and when each missing id was first noticed. */
  private readonly seen = new Set<number>();
  private readonly holes = new Map<number, number>();
  /** Per watched run: its newest conversation event read, and its watchers. */
  private readonly runs = new Map<string, { after: number; watchers: Set<FeedWatcher> }>();
  /** State changes read in full: another team's are not. */
  private readInFull = 0;
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
    return this.watching;
  }

  /** State changes read in full so far (metrics, tests). */
  get changesRead(): number {
    return this.readInFull;
  }

  /**
   * Starts feeding `w` from now on; a run watcher's events from `eventsAfter`. Resolves once the
   * feed's cursor is set (`from`: only changes above it come live), so that what the caller then
   * replays from the database overlaps the live part (watchers drop what they already sent by id).
   */
  async watch(w: FeedWatcher, eventsAfter = 0): Promise<{ unwatch: () => void; from: number }> {
    this.watching++;
    const team = this.teams.get(w.teamId);
    if (team) team.add(w);
    else this.teams.set(w.teamId, new Set([w]));
    if (w.runId) {
      const run = this.runs.get(w.runId);
      if (run) {
        run.watchers.add(w);
        run.after = Math.min(run.after, eventsAfter);
      } else this.runs.set(w.runId, { after: eventsAfter, watchers: new Set([w]) });
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
    const team = this.teams.get(w.teamId);
    if (!team?.delete(w)) return;
    if (!team.size) this.teams.delete(w.teamId);
    const run = w.runId ? this.runs.get(w.runId) : undefined;
    if (run?.watchers.delete(w) && !run.watchers.size) this.runs.delete(w.runId!);
    if (--this.watching === 0) this.reset();
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
    if (!this.watching || this.cursor === undefined) return;
    // Changes of watched runs wait for their events; team watchers have theirs at once.
    const ofRuns = new Map<string, StateChange[]>();
    const events = new Map<string, ConversationEvent[]>();
    try {
      await this.activity.inSnapshot(async (q) => {
        // From the cursor (below any missing id), paging on: rows read before are skipped by `seen`.
        let after = this.cursor!;
        let page: Array<StateChange | SkippedChange>;
        do {
          page = await this.activity.changesAfter(after, [...this.teams.keys()], q);
          const fresh: StateChange[] = [];
          for (const c of page) {
            if (this.seen.has(c.id)) continue;
            if (c.run_id !== null) fresh.push(c);
            // Its team's first watcher came during the read: not seen yet, read again in full.
            else if (this.teams.has(c.team_id)) {
              this.again = true;
              continue;
            }
            this.seen.add(c.id);
          }
          if (page.length) after = page[page.length - 1]!.id;
          this.readInFull += fresh.length;
          for (const [teamId, mine] of groupBy(fresh, (c) => c.team_id))
            for (const w of this.teams.get(teamId) ?? []) if (!w.runId) this.tell(() => w.news(mine, []));
          for (const c of fresh) if (this.runs.has(c.run_id)) addToGroup(ofRuns, c.run_id, c);
        } while (page.length === PAGE);
        this.advance(after);
        if (this.runs.size) await this.readEvents(events, q);
      });
    } finally {
      // Changes read are the cursor's past: they go out even when reading the events failed.
      for (const runId of new Set([...ofRuns.keys(), ...events.keys()]))
        for (const w of this.runs.get(runId)?.watchers ?? [])
          this.tell(() => w.news(ofRuns.get(runId) ?? [], events.get(runId) ?? []));
    }
  }

  /** Every watched run's conversation events after its cursor, into `into` by run. */
  private async readEvents(into: Map<string, ConversationEvent[]>, q: Queryable): Promise<void> {
    let events: ConversationEvent[];
    do {
      events = await this.activity.eventsAfter(new Map([...this.runs].map(([id, r]) => [id, r.after])), q);
      for (const e of events) {
        const run = this.runs.get(e.run_id);
        if (run && e.id > run.after) run.after = e.id;
        addToGroup(into, e.run_id, e);
      }
    } while (events.length >= PAGE);
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

  /** A watcher's failure is its own. */
  private tell(fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.logger.warn(`a run stream failed: ${(err as Error).message}`);
    }
  }
}
