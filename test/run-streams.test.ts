import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Queryable } from '../src/database/database.js';
import { Notifications } from '../src/database/notifications.js';
import { RunActivityRepository, type StateChange } from '../src/notifications/run-activity.repository.js';
import { RunFeed } from '../src/notifications/run-feed.js';
import { WorkerRunsService } from '../src/workers/queue/worker-runs.service.js';
import { eventually } from './support/eventually.js';
import { openSse, type SseClient, type SseEvent } from './support/sse.js';
import { runIn, startTestService, type TestService } from './support/service.js';
import { twoTeamsNote, twoTeamsRefused } from './support/sandbox-check.js';

/**
 * The run timeline and the live streams (docs/run-api.md "Timeline", "Live streams"), over real
 * loopback HTTP against a service whose one worker runs the example harness. HTTP_REQUEST_TIMEOUT_MS
 * is short: a stream outlives it.
 */
describe('run timeline and live streams', () => {
  let t: TestService;
  let other: { team: { id: string }; key: string };
  const streams: SseClient[] = [];
  const auth = (key: string) => ({ authorization: `Bearer ${key}` });
  const watch = async (path: string, headers: Record<string, string> = {}, key = t.adminKey) => {
    const s = await openSse(`${t.api}${path}`, { ...auth(key), ...headers });
    streams.push(s);
    return s;
  };
  const create = async (body: Record<string, unknown>, key = t.adminKey) => {
    const res = await t.call('POST', '/api/v1/agent/runs', body, key);
    expect(res.status).toBe(200);
    return res.body.run_id as string;
  };
  const states = (events: SseEvent[], runId?: string) =>
    events
      .filter((e) => e.event === 'run.state' && (!runId || e.data.run_id === runId))
      .map((e) => e.data.state);

  beforeAll(async () => {
    t = await startTestService({ WORKER_CONCURRENCY: '1', HTTP_REQUEST_TIMEOUT_MS: '1000' });
    other = await t.newTeam('other-team');
  });
  afterAll(async () => {
    for (const s of streams) s.close();
    await t?.stop();
  });

  it.skipIf(twoTeamsRefused)(
    `streams one run from QUEUED to SUCCEEDED: its states and its conversation, each with an id${twoTeamsNote}`,
    async () => {
      const team = await watch('/agent/runs/events');
      expect(team.status).toBe(200);
      expect(team.contentType).toMatch(/^text\/event-stream/);
      const runId = await create({ prompt: 'Watch me run' });
      const run = await watch(`/agent/runs/${runId}/events`);
      expect(run.status).toBe(200);
      await run.waitFor((es) => states(es).includes('SUCCEEDED'), 'the run stream to show SUCCEEDED');
      expect(states(run.events)).toEqual(['QUEUED', 'CLAIMED', 'INPROGRESS', 'SUCCEEDED']);
      const conversation = run.events.filter((e) => e.event === 'run.conversation');
      expect(conversation[0]!.data).toMatchObject({ type: 'message', role: 'user', run_id: runId });
      expect(conversation[0]!.data.body.text).toContain('Watch me run');
      expect(conversation.length).toBeGreaterThan(1);
      // Ids grow, so a reconnect can say where it stopped.
      const ids = run.events.map((e) => e.id!.split('-').map(Number));
      for (let i = 1; i < ids.length; i++)
        expect(ids[i]![0]! + ids[i]![1]!).toBeGreaterThan(ids[i - 1]![0]! + ids[i - 1]![1]!);
      // The team stream saw the run live, from its creation (it was open before).
      await team.waitFor(
        (es) => states(es, runId).includes('SUCCEEDED'),
        'the team stream to show SUCCEEDED',
      );
      expect(states(team.events, runId)).toEqual(['QUEUED', 'CLAIMED', 'INPROGRESS', 'SUCCEEDED']);
      const claimed = team.events.find((e) => e.data.run_id === runId && e.data.state === 'CLAIMED')!;
      expect(claimed.data.worker_id).toEqual(expect.any(String));
    },
  );

  it('a run’s end comes after the messages written with it, live and replayed', async () => {
    // A short harness's whole report (its start, its messages, its end) is one statement, one instant.
    const { team, key } = await t.newTeam('last-words');
    const runId = await create({ prompt: 'Say your last words', config: { worker_host: 'box-lw' } }, key);
    const live = await watch(`/agent/runs/${runId}/events`, {}, key);
    await live.waitFor((es) => states(es).includes('QUEUED'), 'QUEUED');
    const workerRuns = t.service.app.get(WorkerRunsService);
    const box = { id: 'box-lw-1', host: 'box-lw', teamId: team.id };
    await workerRuns.register(box);
    const [claimed] = await workerRuns.claim(box, 1);
    expect(claimed?.run_id).toBe(runId);
    const said = ['first words', 'last words'].map((text) => ({
      type: 'message' as const,
      role: 'assistant',
      text,
    }));
    await workerRuns.finish(box, runId, claimed!.execution, {
      exitCode: 0,
      signal: null,
      lastLines: [],
      events: said,
      startedMsAgo: 0,
    });
    const told = (es: SseEvent[]) =>
      es.map((e) => (e.event === 'run.state' ? e.data.state : e.data.body.text));
    const expected = [
      'QUEUED',
      'CLAIMED',
      'Say your last words',
      'INPROGRESS',
      'first words',
      'last words',
      'SUCCEEDED',
    ];
    await live.waitFor((es) => states(es).includes('SUCCEEDED'), 'SUCCEEDED');
    expect(told(live.events)).toEqual(expected);
    const replayed = await watch(`/agent/runs/${runId}/events`, {}, key);
    await replayed.waitFor((es) => es.length >= expected.length, `${expected.length} events`);
    expect(told(replayed.events)).toEqual(expected);
  });

  it.skipIf(twoTeamsRefused)(
    `a reconnect with Last-Event-ID gets exactly what came after that id${twoTeamsNote}`,
    async () => {
      const runId = await create({ prompt: 'Resume me' });
      await runIn(t, runId, ['SUCCEEDED']);
      // Everything the run wrote, once it ended: the stream from its start has exactly that many events.
      const [{ n }] = await t.service.db.query(
        `SELECT (SELECT count(*) FROM run_transitions WHERE run_id = $1) + (SELECT count(*) FROM run_events WHERE run_id = $1) AS n`,
        [runId],
      );
      const first = await watch(`/agent/runs/${runId}/events`);
      await first.waitFor((es) => es.length === Number(n), `${n} events`);
      first.close();
      for (const k of [0, 2, first.events.length - 2]) {
        const again = await watch(`/agent/runs/${runId}/events`, { 'last-event-id': first.events[k]!.id! });
        const rest = first.events.slice(k + 1);
        await again.waitFor((es) => es.length >= rest.length, `${rest.length} events after #${k}`);
        expect(again.events).toEqual(rest);
        again.close();
      }
      // The team stream resumes too: after the run's QUEUED, the rest of its states.
      const teamIds = await watch('/agent/runs/events', { 'last-event-id': '0' });
      await teamIds.waitFor((es) => states(es, runId).includes('SUCCEEDED'), 'the team replay');
      const queued = teamIds.events.find((e) => e.data.run_id === runId && e.data.state === 'QUEUED')!;
      const resumed = await watch('/agent/runs/events', { 'last-event-id': queued.id! });
      await resumed.waitFor((es) => states(es, runId).includes('SUCCEEDED'), 'the team resume');
      expect(states(resumed.events, runId)).toEqual(['CLAIMED', 'INPROGRESS', 'SUCCEEDED']);
    },
  );

  it.skipIf(twoTeamsRefused)(
    `a team stream takes the run list’s filters and never shows another team’s runs${twoTeamsNote}`,
    async () => {
      const filtered = await watch('/agent/runs/events?metadata[lane]=a&state=QUEUED&state=SUCCEEDED');
      const theirs = await create({ prompt: 'Their run' }, other.key);
      const laneB = await create({ prompt: 'Lane b', metadata: { lane: 'b' } });
      const laneA = await create({ prompt: 'Lane a', metadata: { lane: 'a' } });
      await filtered.waitFor((es) => states(es, laneA).includes('SUCCEEDED'), 'lane a SUCCEEDED');
      // One slot, oldest first: their run and lane b ended before lane a was claimed.
      await runIn(t, laneB, ['SUCCEEDED']);
      expect(filtered.events.map((e) => [e.data.run_id, e.data.state])).toEqual([
        [laneA, 'QUEUED'],
        [laneA, 'SUCCEEDED'],
      ]);
      expect(filtered.events.some((e) => e.data.run_id === theirs)).toBe(false);
    },
  );

  it('refuses bad input and strangers before streaming anything', async () => {
    const runId = await create({ prompt: 'Mine', config: { worker_host: 'nobody-here' } });
    for (const path of [`/agent/runs/${runId}/events`, `/agent/runs/${runId}/timeline`]) {
      const stranger = await watch(path, {}, other.key);
      expect(stranger.status).toBe(404);
      const anonymous = await openSse(`${t.api}${path}`);
      expect(anonymous.status).toBe(401);
    }
    expect((await openSse(`${t.api}/agent/runs/events`)).status).toBe(401);
    const bad = await t.call('GET', `/api/v1/agent/runs/${runId}/events`, undefined, t.adminKey, {
      'last-event-id': 'yesterday',
    });
    expect(bad.status).toBe(400);
    expect(bad.body.detail).toMatch(/Last-Event-ID/);
    const listOnly = await t.call('GET', '/api/v1/agent/runs/events?sort_by=title');
    expect(listOnly.status).toBe(400);
    expect(listOnly.body.detail).toMatch(/sort_by/);
    expect((await t.call('GET', '/api/v1/agent/runs/events?state=NAPPING')).status).toBe(400);
  });

  it.skipIf(twoTeamsRefused)(
    `the timeline lists queued, claimed by its worker, started, follow-ups, cancel and ended with reasons${twoTeamsNote}`,
    async () => {
      const done = await create({ prompt: 'Short life' });
      await runIn(t, done, ['SUCCEEDED']);
      const lived = (await t.call('GET', `/api/v1/agent/runs/${done}/timeline`)).body;
      expect(lived.run_id).toBe(done);
      expect(lived.timeline.map((e: any) => e.event)).toEqual(['queued', 'claimed', 'started', 'ended']);
      expect(lived.timeline[1].worker_id).toEqual(expect.any(String));
      expect(lived.timeline[3].state).toBe('SUCCEEDED');

      // Never claimed (no such worker): a follow-up while queued, a cancel, a follow-up that continues it.
      const runId = await create({ prompt: 'Wait for me', config: { worker_host: 'nobody-here' } });
      expect(
        (await t.call('POST', `/api/v1/agent/runs/${runId}/followups`, { message: 'also this' })).status,
      ).toBe(200);
      expect((await t.call('POST', `/api/v1/agent/runs/${runId}/cancel`)).status).toBe(200);
      expect(
        (await t.call('POST', `/api/v1/agent/runs/${runId}/followups`, { message: 'try again' })).status,
      ).toBe(200);
      const { timeline } = (await t.call('GET', `/api/v1/agent/runs/${runId}/timeline`)).body;
      expect(timeline.map((e: any) => [e.type, e.event ?? e.message, e.state ?? null])).toEqual([
        ['state', 'queued', 'QUEUED'],
        ['followup', 'also this', null],
        ['state', 'cancelled', 'CANCELLED'],
        ['followup', 'try again', null],
        ['state', 'continued', 'QUEUED'],
      ]);
      expect(timeline[2].status_message.message).toMatch(/^Cancelled by /);
      expect(timeline[2].previous_state).toBe('QUEUED');
      const times = timeline.map((e: any) => Date.parse(e.at));
      expect([...times].sort((a, b) => a - b)).toEqual(times);
    },
  );

  it('outlives HTTP_REQUEST_TIMEOUT_MS, which limits receiving a request, not a stream', async () => {
    const opened = Date.now();
    const open = await watch('/agent/runs/events');
    // Past twice the timeout (1 s) and Node's once-a-second check of it.
    await eventually(() => Date.now() - opened > 2500, 'the request timeout to pass twice', {
      intervalMs: 250,
    });
    const runId = await create({ prompt: 'Still listening?', config: { worker_host: 'nobody-here' } });
    await open.waitFor((es) => states(es, runId).includes('QUEUED'), 'QUEUED on the old stream');
  });

  it('a stream on another replica hears the change through its LISTEN connection', async () => {
    const replica = await startTestService({}, { sameDatabaseAs: t });
    try {
      const there = await openSse(`${replica.api}/agent/runs/events`, auth(t.adminKey));
      streams.push(there);
      const runId = await create({ prompt: 'Made here', config: { worker_host: 'nobody-here' } });
      await there.waitFor((es) => states(es, runId).includes('QUEUED'), 'the other replica to hear QUEUED');
      await t.call('POST', `/api/v1/agent/runs/${runId}/cancel`);
      await there.waitFor(
        (es) => states(es, runId).includes('CANCELLED'),
        'the other replica to hear CANCELLED',
      );
      expect(states(there.events, runId)).toEqual(['QUEUED', 'CANCELLED']);
    } finally {
      await replica.stop();
    }
  });

  it('the reader reads in full only the changes of teams someone watches', async () => {
    const feed = t.service.app.get(RunFeed);
    for (const s of streams.splice(0)) s.close();
    await eventually(() => feed.size === 0, 'every earlier stream to close');
    const watching = await t.newTeam('watching-team');
    const open = await watch('/agent/runs/events', {}, watching.key);
    const before = feed.changesRead;
    const unwatched: string[] = [];
    for (let i = 0; i < 5; i++)
      unwatched.push(
        await create({ prompt: `Nobody watches ${i}`, config: { worker_host: 'nobody-here' } }, other.key),
      );
    const runId = await create({ prompt: 'Watched', config: { worker_host: 'nobody-here' } }, watching.key);
    await open.waitFor((es) => states(es, runId).includes('QUEUED'), 'QUEUED on the watching team’s stream');
    // The other team's five QUEUED were passed over by id: one change read in full, the watched one.
    expect(feed.changesRead - before).toBe(1);
    expect(open.events.some((e) => unwatched.includes(e.data.run_id))).toBe(false);
  });

  it('a team whose first stream opens while the reader reads still gets the change read as an id only', async () => {
    // The reader's first query is held once it has its rows: the other team's change is an id in it.
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let queried!: () => void;
    const inFlight = new Promise<void>((resolve) => (queried = resolve));
    let first = true;
    class HeldActivity extends RunActivityRepository {
      override async changesAfter(after: number, teams: string[], q?: Queryable) {
        const rows = await super.changesAfter(after, teams, q);
        if (first) {
          first = false;
          queried();
          await held;
        }
        return rows;
      }
    }
    const feed = new RunFeed(t.service.app.get(Notifications), new HeldActivity(t.service.db));
    const watcher = await t.newTeam('first-watcher');
    await feed.watch({ teamId: watcher.team.id, news: () => undefined });
    const runId = await create(
      { prompt: 'Read as an id', config: { worker_host: 'nobody-here' } },
      other.key,
    );
    const reading = feed.read();
    await inFlight;
    const theirs: StateChange[] = [];
    await feed.watch({ teamId: other.team.id, news: (cs) => theirs.push(...cs) });
    release();
    await reading;
    expect(theirs.filter((c) => c.run_id === runId).map((c) => c.state)).toEqual(['QUEUED']);
  });

  it('streams end when the service stops, without holding up its stop', async () => {
    const open = await watch('/agent/runs/events');
    expect(open.status).toBe(200);
    await t.restart();
    await open.ended;
  });
});
