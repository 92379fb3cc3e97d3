import type { ServerResponse } from 'node:http';
import {
  Inject,
  Injectable,
  Logger,
  type BeforeApplicationShutdown,
  type OnModuleInit,
} from '@nestjs/common';
import type { AuthContext } from '../auth/auth-context.js';
import { UUID_PATTERN, uuidFrom } from '../common/ids.js';
import { Periodic } from '../common/periodic.js';
import { invalidParam, NotFound } from '../common/problem.js';
import { isTerminal } from '../runs/run-state.js';
import {
  PAGE,
  RunActivityRepository,
  type ConversationEvent,
  type StateChange,
} from './run-activity.repository.js';
import { RunFeed } from './run-feed.js';
import { matchesRunStream, type RunStreamFilter } from './run-stream-filter.js';
import { SseFrame, SseStream } from './sse-stream.js';

/** A comment line this often keeps idle proxies from closing a stream. */
const HEARTBEAT_MS = 15_000;

/** A run's lifecycle, oldest first: every state it entered and every follow-up it was sent. */
export type TimelineEntry =
  | ({ type: 'state'; event: string } & ReturnType<typeof presentChange>)
  | { type: 'followup'; at: string; message: string; mode?: string; delivered_at?: string };

/**
 * A state change as the clients' RunGetTimelineResponse event: the changes their `event_type` has a
 * value for (created, claimed, agent started, blocked, cancelled, and the three ends); factoryd's
 * details in `payload`. A resume, a continuation and a follow-up have none: they are in `timeline`.
 */
export interface TimelineEvent {
  event_uuid: string;
  event_type: string;
  occurred_at: string;
  run_id: string;
  execution_id?: number;
  payload: Record<string, unknown>;
}

const END_EVENT_TYPES: Partial<Record<string, string>> = {
  SUCCEEDED: 'oz_run_done',
  FAILED: 'oz_run_failed',
  ERROR: 'oz_run_errored',
  CANCELLED: 'oz_run_cancelled',
};

function eventType(c: StateChange): string | undefined {
  if (c.previous_state === null) return 'oz_run_created';
  if (c.state === 'CLAIMED') return 'oz_run_claimed';
  if (c.state === 'INPROGRESS') return c.previous_state === 'BLOCKED' ? undefined : 'agent_started';
  if (c.state === 'BLOCKED') return 'oz_run_blocked';
  return END_EVENT_TYPES[c.state];
}

function timelineEvent(c: StateChange): TimelineEvent | undefined {
  const type = eventType(c);
  if (!type) return undefined;
  const { run_id, at, execution, ...payload } = presentChange(c);
  return {
    // Stable across reads: the state change's own id, as a UUID.
    event_uuid: uuidFrom(`run-transition:${c.id}`),
    event_type: type,
    occurred_at: at,
    run_id,
    ...(execution ? { execution_id: execution } : {}),
    payload,
  };
}

/** What the state it entered means in a run's life (the timeline's `event`). */
function lifecycleEvent(c: StateChange): string {
  if (c.previous_state === null) return 'queued';
  if (c.state === 'CLAIMED') return 'claimed';
  if (c.state === 'INPROGRESS') return c.previous_state === 'BLOCKED' ? 'resumed' : 'started';
  if (c.state === 'BLOCKED') return 'blocked';
  if (c.state === 'QUEUED') return isTerminal(c.previous_state) ? 'continued' : 'queued';
  if (c.state === 'CANCELLED') return 'cancelled';
  if (isTerminal(c.state)) return 'ended';
  return c.state.toLowerCase();
}

function presentChange(c: StateChange) {
  return {
    run_id: c.run_id,
    state: c.state,
    previous_state: c.previous_state,
    at: new Date(c.at).toISOString(),
    execution: c.execution,
    ...(c.worker_id ? { worker_id: c.worker_id } : {}),
    ...(c.status_message ? { status_message: c.status_message } : {}),
  };
}

function presentEvent(e: ConversationEvent) {
  return {
    run_id: e.run_id,
    execution: e.execution,
    type: e.type,
    ...(e.role ? { role: e.role } : {}),
    ...(e.kind ? { kind: e.kind } : {}),
    body: e.body,
    created_at: new Date(e.created_at).toISOString(),
  };
}

/** Each change and event is serialised once, however many streams send it. */
const serialised = new WeakMap<object, string>();
function json(item: StateChange | ConversationEvent, present: (i: never) => unknown): string {
  let text = serialised.get(item);
  if (text === undefined) serialised.set(item, (text = JSON.stringify(present(item as never))));
  return text;
}

/** A team stream's event for a change (its id is the change's): framed once for every team stream. */
const teamFrames = new WeakMap<StateChange, SseFrame>();
function teamFrame(c: StateChange): SseFrame {
  let frame = teamFrames.get(c);
  if (!frame) teamFrames.set(c, (frame = SseFrame.event('run.state', String(c.id), json(c, presentChange))));
  return frame;
}

/** Entering these opens a stretch of a run's life: events at the same instant happen in it. */
const OPENING_STATES: ReadonlySet<string> = new Set(['QUEUED', 'CLAIMED', 'INPROGRESS']);

/**
 * A run's state changes and conversation events as one timeline, each kind in its own order, merged
 * by time. At one instant one statement wrote both: a change into QUEUED, CLAIMED or INPROGRESS comes
 * before the events (the claim's opening message follows CLAIMED), any other after them (a report's
 * last messages come before the end they led to).
 */
function inRunOrder(
  changes: StateChange[],
  events: ConversationEvent[],
): Array<StateChange | ConversationEvent> {
  const out: Array<StateChange | ConversationEvent> = [];
  let i = 0;
  let j = 0;
  while (i < changes.length || j < events.length) {
    const c = changes[i];
    const e = events[j];
    const changeFirst =
      c !== undefined &&
      (e === undefined ||
        +new Date(c.at) < +new Date(e.created_at) ||
        (+new Date(c.at) === +new Date(e.created_at) && OPENING_STATES.has(c.state)));
    out.push(changeFirst ? changes[i++]! : events[j++]!);
  }
  return out;
}

/** `Last-Event-ID` of a run stream: `<state change id>-<conversation event id>`. */
const RUN_EVENT_ID = /^(\d{1,15})-(\d{1,15})$/;
const TEAM_EVENT_ID = /^\d{1,15}$/;

/**
 * The run timeline and the live streams. Every stream is fed by the process's one RunFeed (no
 * database query per stream for live news): it first replays from the database what came after the
 * client's Last-Event-ID, then sends what the feed hands it, dropping by id what it already sent.
 */
@Injectable()
export class RunStreamsService implements OnModuleInit, BeforeApplicationShutdown {
  private readonly logger = new Logger('RunStreams');
  private readonly streams = new Set<SseStream>();
  private closing = false;
  /** One timer for every stream's heartbeat, however many are open. */
  private readonly heartbeats = new Periodic({
    everyMs: HEARTBEAT_MS,
    run: () => {
      for (const s of this.streams) s.heartbeat();
    },
    onError: (err) => this.logger.warn(`a heartbeat failed: ${(err as Error).message}`),
  });

  constructor(
    @Inject(RunActivityRepository) private readonly activity: RunActivityRepository,
    @Inject(RunFeed) private readonly feed: RunFeed,
  ) {}

  /** Open streams (metrics, tests). */
  get openStreams(): number {
    return this.streams.size;
  }

  onModuleInit(): void {
    this.heartbeats.start();
  }

  /** Streams end when the service stops, before HTTP closes (which would wait for them). */
  async beforeApplicationShutdown(): Promise<void> {
    this.closing = true;
    for (const s of [...this.streams]) s.end();
    await this.heartbeats.stop();
  }

  /**
   * A run's life, oldest first: as the clients' `events`, and as factoryd's fuller `timeline` (every
   * state entered and every follow-up sent).
   */
  async timeline(
    auth: AuthContext,
    runId: string,
  ): Promise<{ events: TimelineEvent[]; timeline: TimelineEntry[] }> {
    await this.mustSee(auth, runId);
    const changes = await this.all((after) => this.activity.changesOfRun(runId, after));
    const entries: Array<TimelineEntry & { order: number }> = [];
    for (const c of changes)
      entries.push({ type: 'state', event: lifecycleEvent(c), ...presentChange(c), order: 1 });
    for (const f of await this.activity.followups(runId))
      entries.push({
        type: 'followup',
        at: f.created_at.toISOString(),
        message: f.message,
        ...(f.mode ? { mode: f.mode } : {}),
        ...(f.delivered_at ? { delivered_at: f.delivered_at.toISOString() } : {}),
        order: 0,
      });
    // By time; at the same instant the follow-up first: it is what continued an ended run.
    entries.sort((a, b) => a.at.localeCompare(b.at) || a.order - b.order);
    return {
      events: changes.map(timelineEvent).filter((e) => e !== undefined),
      timeline: entries.map(({ order: _, ...e }) => e as TimelineEntry),
    };
  }

  /** Checked before the response starts, so that a refusal is an ordinary problem+json. */
  async checkRun(
    auth: AuthContext,
    runId: string,
    lastEventId: string | undefined,
  ): Promise<[number, number]> {
    await this.mustSee(auth, runId);
    if (lastEventId === undefined) return [0, 0];
    const m = RUN_EVENT_ID.exec(lastEventId);
    if (!m)
      throw invalidParam('Last-Event-ID', 'Last-Event-ID must be an id this stream sent, such as 12-34');
    return [Number(m[1]), Number(m[2])];
  }

  checkTeam(lastEventId: string | undefined): number | undefined {
    if (lastEventId === undefined) return undefined;
    if (!TEAM_EVENT_ID.test(lastEventId))
      throw invalidParam('Last-Event-ID', 'Last-Event-ID must be an id this stream sent, such as 1234');
    return Number(lastEventId);
  }

  /** One run: its state changes and conversation events, from the start or after `after`, then live. */
  async streamRun(
    auth: AuthContext,
    runId: string,
    after: [number, number],
    res: ServerResponse,
  ): Promise<void> {
    let [sentChange, sentEvent] = after;
    const id = () => `${sentChange}-${sentEvent}`;
    // What has not been sent yet, in the run's order, framed into `out` (sent in one write).
    const frames = (cs: StateChange[], es: ConversationEvent[], out: SseFrame[] = []) => {
      for (const item of inRunOrder(cs, es))
        if ('state' in item) {
          if (item.id > sentChange) {
            sentChange = item.id;
            out.push(SseFrame.event('run.state', id(), json(item, presentChange)));
          }
        } else if (item.id > sentEvent) {
          sentEvent = item.id;
          out.push(SseFrame.event('run.conversation', id(), json(item, presentEvent)));
        }
      return out;
    };
    // Live news waits in `held` until the replay is out.
    let held: Array<[StateChange[], ConversationEvent[]]> | undefined = [];
    const { unwatch } = await this.feed.watch(
      {
        teamId: auth.team.id,
        runId,
        news: (cs, es) => (held ? held.push([cs, es]) : stream.send(frames(cs, es))),
      },
      // Live from the run's newest event: the replay below covers everything up to it.
      Math.max(after[1], await this.activity.lastEventId(runId)),
    );
    // Opened (headers out) once the feed watches: no change after the client sees the stream is missed.
    const stream = this.open(res);
    stream.onEnd(unwatch);
    const replay: SseFrame[] = [];
    try {
      // In one snapshot, as the feed reads: no report split between the replay and the live part.
      await this.activity.inSnapshot(async (q) => {
        const changes = await this.all((a) => this.activity.changesOfRun(runId, a, q), after[0]);
        const events = await this.all((a) => this.activity.eventsAfter(new Map([[runId, a]]), q), after[1]);
        frames(changes, events, replay);
      });
    } catch (err) {
      stream.end();
      throw err;
    }
    for (const [cs, es] of held) frames(cs, es, replay);
    held = undefined;
    stream.send(replay);
  }

  /** A team's runs: their state changes passing `filter`, after `after` when given, then live. */
  async streamTeam(
    auth: AuthContext,
    filter: RunStreamFilter,
    after: number | undefined,
    res: ServerResponse,
  ): Promise<void> {
    // Ids at or below the feed's start come only from the replay; above it, from either: remembered.
    let from = 0;
    const replayed = new Set<number>();
    const send = (cs: StateChange[], replay: boolean) => {
      const frames: SseFrame[] = [];
      for (const c of cs) {
        if (replay) {
          if (c.id > from) replayed.add(c.id);
        } else if (replayed.delete(c.id)) continue;
        if (matchesRunStream(filter, c)) frames.push(teamFrame(c));
      }
      stream.send(frames);
    };
    let held: StateChange[][] | undefined = [];
    const watching = await this.feed.watch({
      teamId: auth.team.id,
      news: (cs) => (held ? held.push(cs) : send(cs, false)),
    });
    from = watching.from;
    const stream = this.open(res);
    stream.onEnd(watching.unwatch);
    if (after !== undefined) {
      let page: StateChange[];
      do {
        page = await this.activity.changesOfTeam(auth.team.id, after);
        if (page.length) after = page[page.length - 1]!.id;
        send(page, true);
      } while (page.length === PAGE && stream.open);
    }
    for (const cs of held) send(cs, false);
    held = undefined;
  }

  private open(res: ServerResponse): SseStream {
    const stream = new SseStream(res);
    this.streams.add(stream);
    stream.onEnd(() => this.streams.delete(stream));
    if (this.closing) stream.end();
    return stream;
  }

  private async mustSee(auth: AuthContext, runId: string): Promise<void> {
    if (!UUID_PATTERN.test(runId) || !(await this.activity.runInTeam(auth.team.id, runId)))
      throw new NotFound(`run ${runId} does not exist`);
  }

  /** Every page of a read, in order. */
  private async all<T extends { id: number }>(
    read: (after: number) => Promise<T[]>,
    after = 0,
  ): Promise<T[]> {
    const out: T[] = [];
    let page: T[];
    do {
      page = await read(after);
      out.push(...page);
      if (page.length) after = page[page.length - 1]!.id;
    } while (page.length === PAGE);
    return out;
  }
}
