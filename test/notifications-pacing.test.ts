import { randomUUID } from 'node:crypto';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Scheduler } from '../src/common/periodic.js';
import type { Database } from '../src/database/database.js';
import { NotificationDispatcher } from '../src/notifications/notification-dispatcher.js';
import { NotificationSender } from '../src/notifications/notification-sender.js';
import { NotificationsRepository } from '../src/notifications/notifications.repository.js';
import { DefinitionStore } from '../src/reconciler/definition-store.js';
import { Reconciler } from '../src/reconciler/reconciler.js';
import { SecretCipher } from '../src/secrets/secret-cipher.js';
import { SecretsService } from '../src/secrets/secrets.service.js';
import { eventually } from './support/eventually.js';
import { explaining } from './support/explain.js';
import { baseFactory, TestRepo } from './support/git-repo.js';
import { NotificationReceiver, type Received } from './support/notification-receiver.js';
import { startTestService, type TestService } from './support/service.js';

// A dispatcher driven by hand: real PostgreSQL (the service's migrated database, its own dispatcher
// stopped), real HTTP on loopback (a receiver, a closed port, a tarpit), its clock injected and its
// passes run by the test (`pump`, then `settled`): no sleeps, no timers.
let t: TestService;
const closers: Array<() => Promise<void> | void> = [];
beforeAll(async () => {
  t = await startTestService({ NOTIFICATIONS_ALLOW_PRIVATE_URLS: 'true' });
  await t.service.app.get(NotificationDispatcher).stop();
});
afterAll(async () => {
  for (const close of closers) await close();
  await t?.stop();
});

const SCHEDULE = [0, 5_000, 300_000];
/** Nothing fires: the test runs each pass itself. */
const never: Scheduler = { setTimeout: () => undefined, clearTimeout: () => undefined };

/** The statements (and transactions) that write the attempt log, counted as the repository sends them. */
function countingDatabase(db: Database) {
  const writes: string[] = [];
  const wrapped = new Proxy(db, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (typeof value !== 'function') return value;
      if (prop === 'query' || prop === 'execute')
        return (text: string, params?: unknown[]) => {
          if (/INSERT INTO notification_attempts/.test(text)) writes.push(text);
          return (value as (t: string, p?: unknown[]) => unknown).call(target, text, params);
        };
      if (prop === 'transaction')
        return (work: (tx: unknown) => unknown) => {
          // A transaction's own statements do not pass through here: count the transaction.
          writes.push('transaction');
          return (value as (w: unknown) => unknown).call(target, work);
        };
      return (value as (...a: unknown[]) => unknown).bind(target);
    },
  });
  return { db: wrapped, writes };
}

let clock: Date;
let errors: unknown[];
let disabled: string[];
let counted: ReturnType<typeof countingDatabase>;
beforeEach(async () => {
  // Each test's endpoints alone: the earlier tests' are left disabled.
  await t.service.db.execute(`UPDATE notification_endpoints SET enabled = false`);
  errors = [];
  disabled = [];
  counted = countingDatabase(t.service.db);
});

/** Every dispatcher of this file's tests, so that `queue` can wait for a pass one of them has in flight. */
const dispatchers: NotificationDispatcher[] = [];
function made(d: NotificationDispatcher) {
  dispatchers.push(d);
  return d;
}

function dispatcher(
  opts: {
    timeoutMs?: number;
    disableAfter?: number;
    schedule?: number[];
    connections?: number;
    probeAfterIdleMs?: number;
    db?: Database;
  } = {},
) {
  const timeoutMs = opts.timeoutMs ?? 2_000;
  const connections = opts.connections ?? 16;
  return made(
    new NotificationDispatcher(
      new NotificationsRepository(opts.db ?? counted.db),
      new NotificationSender({ allowPrivate: true, timeoutMs, connectionsPerEndpoint: connections }),
      t.service.app.get(SecretCipher),
      t.service.app.get(SecretsService),
      {
        retryScheduleMs: opts.schedule ?? SCHEDULE,
        disableAfter: opts.disableAfter ?? 5,
        timeoutMs,
        connectionsPerEndpoint: connections,
        probeAfterIdleMs: opts.probeAfterIdleMs,
        now: () => clock,
        scheduler: never,
        onError: (err) => errors.push(err),
        onDisabled: (id) => disabled.push(id),
      },
    ),
  );
}

/** One pass, and every attempt it started recorded. */
async function pass(d: NotificationDispatcher) {
  await d.pump();
  await d.settled();
}

/**
 * Events of the team (of its factory `factoryId`, whose endpoints hear only its events) made into
 * messages as a state change's trigger makes them, before they are due.
 */
async function queue(teamId: string, events: Array<{ run?: string }>, factoryId: string | null = null) {
  // Nothing is due from before the events go in: a pass a delivery woke may still be running, and at
  // the clock of its delivery it would claim the first of them, under a lease that the clock set
  // below may already have passed (the next claim then sends them again).
  clock = new Date(0);
  // And a pass already under way (woken by a delivery, its claim's clock read before the line above)
  // ends first: its claim took the first message made here once, and the test's next pass found its
  // endpoint held. A pass started now, at that clock, takes nothing.
  await Promise.all(dispatchers.map((d) => d.pump()));
  for (const [n, e] of events.entries()) await event(teamId, { n, run_id: e.run ?? null }, e.run, factoryId);
  clock = new Date(Date.now() + 60_000);
  counted.writes.length = 0;
}

/** One event of the team, made into its messages by the function the triggers call. */
async function event(
  teamId: string,
  payload: object,
  run: string | null = null,
  factoryId: string | null = null,
) {
  await t.service.db.execute(
    `SELECT notification_messages_of(jsonb_build_array(jsonb_build_object(
       'id', nextval('notification_event_ids'), 'team_id', $1::uuid, 'factory_id', $2::uuid, 'type', 'run.queued',
       'run_id', $3::uuid, 'payload', $4::jsonb, 'at', clock_timestamp())))`,
    [teamId, factoryId, run, payload],
  );
}

async function subscribe(url: string, key?: string) {
  const res = await t.call(
    'POST',
    '/api/v1/notifications/endpoints',
    { name: `ep-${Math.random().toString(36).slice(2)}`, url },
    key,
  );
  expect(res.status).toBe(201);
  return res.body as { endpoint: { id: string }; secret: string };
}

const listen = async (server: net.Server | { start(): Promise<string> }) => {
  if (server instanceof net.Server) {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  }
  return server.start();
};

/** A URL nothing listens on: every connection is refused. */
async function closedPort(): Promise<string> {
  const server = net.createServer();
  const url = await listen(server);
  await new Promise((resolve) => server.close(resolve));
  return url;
}

/** Accepts connections and never answers; counts them. */
async function tarpit() {
  const sockets = new Set<net.Socket>();
  let connections = 0;
  const server = net.createServer((s) => {
    connections++;
    sockets.add(s);
    s.on('data', () => undefined);
  });
  const url = await listen(server);
  closers.push(() => {
    for (const s of sockets) s.destroy();
    server.close();
  });
  return { url, connections: () => connections };
}

async function receiver() {
  const r = new NotificationReceiver();
  const url = await r.start();
  closers.push(() => r.stop());
  return { r, url };
}

/** A run id whose messages a picky receiver refuses. */
const BAD_RUN = '00000000-0000-4000-8000-00000000bad0';

const messagesOf = (endpointId: string) =>
  t.service.db.query<{ id: string; status: string; attempts: number; next_attempt_at: Date | null }>(
    `SELECT id, status, attempts, next_attempt_at FROM notification_messages WHERE endpoint_id = $1 ORDER BY event_id`,
    [endpointId],
  );
const attemptsOf = async (endpointId: string) =>
  (
    await t.service.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM notification_attempts WHERE endpoint_id = $1`,
      [endpointId],
    )
  )[0]!.n;

describe('a failing endpoint', () => {
  it('is tried per the schedule with its oldest message alone, its other messages held back unattempted', async () => {
    const d = dispatcher();
    const team = await t.newTeam(`refused-${Date.now()}`);
    const { endpoint } = await subscribe(await closedPort(), team.key);
    await queue(
      team.team.id,
      Array.from({ length: 20 }, () => ({})),
    );
    const start = clock.getTime();

    await pass(d);
    expect(await attemptsOf(endpoint.id)).toBe(1);
    // Its failure, the 19 held back and the endpoint, in one statement.
    expect(counted.writes).toHaveLength(1);
    let messages = await messagesOf(endpoint.id);
    expect(messages.map((m) => m.attempts)).toEqual([1, ...Array(19).fill(0)]);
    expect(messages[0]!.next_attempt_at!.getTime()).toBe(start + 5_000);

    // Passes before the retry is due attempt nothing (no spin).
    for (let i = 0; i < 5; i++) await pass(d);
    clock = new Date(start + 4_999);
    await pass(d);
    expect(await attemptsOf(endpoint.id)).toBe(1);

    // At the retry: the same (oldest) message, once; then 5 min later, its last attempt: given up.
    clock = new Date(start + 5_000);
    await pass(d);
    await pass(d);
    expect(await attemptsOf(endpoint.id)).toBe(2);
    clock = new Date(start + 305_000);
    await pass(d);
    messages = await messagesOf(endpoint.id);
    expect(messages.map((m) => [m.status, m.attempts])).toEqual([
      ['failed', 3],
      ...Array(19).fill(['pending', 0]),
    ]);
    // Given up, the next message goes at the next pass, alone.
    await pass(d);
    expect(await attemptsOf(endpoint.id)).toBe(4);
    expect((await messagesOf(endpoint.id)).map((m) => m.attempts).slice(0, 3)).toEqual([3, 1, 0]);
    expect(counted.writes).toHaveLength(4);
    expect(errors).toEqual([]);
  });

  it('records the failures of a pass in one statement', async () => {
    const d = dispatcher();
    const team = await t.newTeam(`flaky-${Date.now()}`);
    const { r, url } = await receiver();
    // The first answers; every later one fails.
    r.behaviour = (n) => (n === 1 ? 204 : 500);
    const { endpoint, secret } = await subscribe(url, team.key);
    r.secret = secret;
    await queue(
      team.team.id,
      Array.from({ length: 11 }, () => ({})),
    );
    await pass(d);
    const messages = await messagesOf(endpoint.id);
    expect(messages.filter((m) => m.status === 'delivered')).toHaveLength(1);
    expect(messages.filter((m) => m.status === 'pending' && m.attempts === 1)).toHaveLength(10);
    expect(await attemptsOf(endpoint.id)).toBe(11);
    expect(counted.writes).toHaveLength(1);
  });

  it('does not hold up another team: its endpoint gets every notification while one refuses and one never answers', async () => {
    const d = dispatcher({ timeoutMs: 60_000 });
    const slow = await t.newTeam(`tarpit-${Date.now()}`);
    const other = await t.newTeam(`other-${Date.now()}`);
    const pit = await tarpit();
    const pitEndpoint = (await subscribe(pit.url, slow.key)).endpoint;
    const refused = (await subscribe(await closedPort(), slow.key)).endpoint;
    const { r, url } = await receiver();
    const mine = await subscribe(url, other.key);
    r.secret = mine.secret;
    await queue(
      slow.team.id,
      Array.from({ length: 30 }, () => ({})),
    );
    for (let n = 0; n < 10; n++) await event(other.team.id, {});
    // Passes, not waiting for the attempts they start: the tarpit's stays in flight throughout.
    await d.pump();
    await eventually(() => r.received.length === 10, 'the other team’s first ten');
    await eventually(
      async () => (await messagesOf(mine.endpoint.id)).every((m) => m.status === 'delivered'),
      'recorded delivered',
    );
    for (let n = 0; n < 10; n++) await event(other.team.id, {});
    await d.pump();
    await eventually(() => r.received.length === 20, 'the next ten, while the tarpit still holds its one');
    expect(r.received.every((x) => x.verified)).toBe(true);
    // One connection to the tarpit (its first message, never answered), one attempt at the refusing one.
    expect(pit.connections()).toBe(1);
    expect(await attemptsOf(pitEndpoint.id)).toBe(0);
    expect(await attemptsOf(refused.id)).toBe(1);
    expect(errors).toEqual([]);
  });
});

describe('an endpoint that goes down while it takes messages', () => {
  it('costs one attempt per connection: its round stops at the first failure, the rest held back', async () => {
    // Delivered lately whatever the machine does between the two passes (a stall of 10 s under load
    // once made the second round begin with a probe).
    const d = dispatcher({ connections: 4, probeAfterIdleMs: Infinity });
    const team = await t.newTeam(`went-down-${Date.now()}`);
    const { r, url } = await receiver();
    const { endpoint, secret } = await subscribe(url, team.key);
    r.secret = secret;
    // It delivers (so its next round needs no probe), then every answer is a 503.
    await queue(team.team.id, [{}]);
    await pass(d);
    expect(r.received).toHaveLength(1);
    // Every answer a 503, none before the four connections' first attempts are all in (the 5th
    // request): under load a lane could start late, after the first 503, and rightly not at all.
    let allIn!: () => void;
    const fourInFlight = new Promise<void>((resolve) => (allIn = resolve));
    r.behaviour = (n) => {
      if (n === 5) allIn();
      return fourInFlight.then(() => 503);
    };
    await queue(
      team.team.id,
      Array.from({ length: 30 }, () => ({})),
    );
    await pass(d);
    // The four connections' first attempts were in flight together; none started after the first 503.
    expect(r.received).toHaveLength(5);
    expect(await attemptsOf(endpoint.id)).toBe(5);
    const messages = await messagesOf(endpoint.id);
    expect(messages.filter((m) => m.status === 'pending' && m.attempts === 1)).toHaveLength(4);
    expect(messages.filter((m) => m.status === 'pending' && m.attempts === 0)).toHaveLength(26);
    const [row] = await t.service.db.query<{ failing_since: Date | null }>(
      `SELECT failing_since FROM notification_endpoints WHERE id = $1`,
      [endpoint.id],
    );
    expect(row!.failing_since).not.toBeNull();
    // Failing now: the next pass before the retry attempts nothing.
    await pass(d);
    expect(await attemptsOf(endpoint.id)).toBe(5);
    expect(errors).toEqual([]);
  });
});

describe('a receiver that refuses one message', () => {
  it('keeps taking the others: a 422 fails that message alone, the endpoint is not failing', async () => {
    const d = dispatcher();
    const team = await t.newTeam(`picky-${Date.now()}`);
    const { r, url } = await receiver();
    // Run "bad"'s messages are refused as unprocessable; everything else is taken.
    r.behaviour = (_n, got) => (got.body.data.run_id === BAD_RUN ? 422 : 204);
    const { endpoint, secret } = await subscribe(url, team.key);
    r.secret = secret;
    await queue(team.team.id, [{ run: BAD_RUN }, {}, {}, {}, {}]);
    await pass(d);
    const messages = await messagesOf(endpoint.id);
    expect(messages.map((m) => [m.status, m.attempts])).toEqual([
      ['pending', 1],
      ...Array(4).fill(['delivered', 1]),
    ]);
    const [row] = await t.service.db.query<{ failing_since: Date | null }>(
      `SELECT failing_since FROM notification_endpoints WHERE id = $1`,
      [endpoint.id],
    );
    expect(row!.failing_since).toBeNull();
    expect(errors).toEqual([]);
  });
});

describe('the documented semantics still hold', () => {
  it('disables an endpoint after its run of given-up messages; the held-back ones stay pending, unattempted', async () => {
    const d = dispatcher({ schedule: [0, 0], disableAfter: 2 });
    const team = await t.newTeam(`disable-${Date.now()}`);
    const { endpoint } = await subscribe(await closedPort(), team.key);
    await queue(
      team.team.id,
      Array.from({ length: 5 }, () => ({})),
    );
    for (let i = 0; i < 10; i++) await pass(d);
    expect((await messagesOf(endpoint.id)).map((m) => [m.status, m.attempts])).toEqual([
      ['failed', 2],
      ['failed', 2],
      ['pending', 0],
      ['pending', 0],
      ['pending', 0],
    ]);
    expect(disabled).toEqual([endpoint.id]);
    const shown = (await t.call('GET', `/api/v1/notifications/endpoints/${endpoint.id}`, undefined, team.key))
      .body;
    expect(shown).toMatchObject({ enabled: false, consecutive_failures: 2 });
    expect(Date.parse(shown.failing_since)).toBeLessThanOrEqual(clock.getTime());
    expect(counted.writes).toHaveLength(4);
  });

  it('keeps a run’s messages in order through a failing spell, and lets them all go once it answers', async () => {
    const d = dispatcher({ schedule: [0, 1_000] });
    const team = await t.newTeam(`order-${Date.now()}`);
    const { r, url } = await receiver();
    r.behaviour = (n) => (n <= 1 ? 503 : 204);
    const { endpoint, secret } = await subscribe(url, team.key);
    r.secret = secret;
    const runs = ['6f1c6d2e-0000-4000-8000-000000000001', '6f1c6d2e-0000-4000-8000-000000000002'];
    await queue(team.team.id, [
      { run: runs[0] },
      { run: runs[1] },
      { run: runs[0] },
      { run: runs[1] },
      { run: runs[0] },
    ]);
    const start = clock.getTime();
    await pass(d);
    // Refused: the run's first message alone; nothing more before its retry.
    await pass(d);
    expect(r.received.map((x) => x.body.data.n)).toEqual([0]);
    clock = new Date(start + 1_000);
    // Delivered at its retry, it lets the rest go (each delivery looks again at once).
    await pass(d);
    await eventually(
      async () => (await messagesOf(endpoint.id)).every((m) => m.status === 'delivered'),
      'all delivered',
    );
    expect(r.received.slice(0, 2).map((x) => x.body.data.n)).toEqual([0, 0]);
    expect(r.ofRun(runs[0]!).map((x) => x.body.data.n)).toEqual([0, 0, 2, 4]);
    expect(r.ofRun(runs[1]!).map((x) => x.body.data.n)).toEqual([1, 3]);
    expect(r.received.every((x) => x.verified)).toBe(true);
    expect(errors).toEqual([]);
  });
});

/** The team resends a message (the API's answer checked). */
async function resend(endpointId: string, messageId: string, key: string) {
  const res = await t.call(
    'POST',
    `/api/v1/notifications/endpoints/${endpointId}/messages/${messageId}/resend`,
    undefined,
    key,
  );
  expect(res.status).toBe(202);
}

/**
 * An endpoint that `notifications/ops.yaml` of a factory of the team makes, applied by the real
 * reconciler from a real git repository; `reapply` commits a changed file and applies it.
 */
async function factoryEndpoint(teamId: string, url: string) {
  const repo = new TestRepo();
  closers.push(() => repo.remove());
  const secret = (await t.service.app.get(SecretsService).generate(teamId, 'notify-secret', 'whsec')).value;
  const factory = await t.service.app
    .get(DefinitionStore)
    .register({ teamId, name: `notify-${Date.now()}`, repoUrl: repo.dir, branch: 'main' });
  const apply = async (description: string) => {
    repo.commit({
      ...baseFactory('notify-secret'),
      'notifications/ops.yaml': `url: ${url}\nsecretName: notify-secret\ndescription: ${description}\n`,
    });
    expect((await t.service.app.get(Reconciler).request(factory!.id)).errors).toEqual([]);
  };
  await apply('first');
  const [endpoint] = await t.service.db.query<{ id: string }>(
    `SELECT id FROM notification_endpoints WHERE factory_id = $1`,
    [factory!.id],
  );
  return { endpoint: endpoint!, secret, factoryId: factory!.id, reapply: () => apply('second') };
}

describe('a re-enable, an apply or a resend while the endpoint’s round is in flight', () => {
  // The endpoint is failing (its first message refused), and its retry is in flight with D1 when the
  // team re-enables it, applies the factory file that makes it, or resends a message. D2 must not
  // claim it meanwhile: it would send the same message again beside D1's attempt, and a run's later
  // messages before D1's answer. The round's outcome then stands.
  const RUN = '6f1c6d2e-0000-4000-8000-0000000000a1';
  it.each(['re-enable', 'apply', 'resend'])('leaves the round its endpoint (%s)', async (what) => {
    const d1 = dispatcher({ timeoutMs: 60_000 });
    const d2 = dispatcher({ timeoutMs: 60_000 });
    const team = await t.newTeam(`inflight-${what}-${Date.now()}`);
    const { r, url } = await receiver();
    let answerD1!: (status: number) => void;
    const retry = new Promise<number>((resolve) => (answerD1 = resolve));
    r.behaviour = (n) => (n === 1 ? 503 : n === 2 ? retry : 204);
    const factory = what === 'apply' ? await factoryEndpoint(team.team.id, url) : undefined;
    const { endpoint, secret } = factory ?? (await subscribe(url, team.key));
    r.secret = secret;
    await queue(team.team.id, [{ run: RUN }, { run: RUN }, {}], factory?.factoryId);
    const start = clock.getTime();
    await pass(d1);
    expect(r.received).toHaveLength(1);

    clock = new Date(start + 5_000);
    await d1.pump();
    await eventually(() => r.received.length === 2, 'the retry in flight');
    const [first, second, third] = await messagesOf(endpoint.id);
    if (what === 're-enable') {
      const res = await t.call(
        'PATCH',
        `/api/v1/notifications/endpoints/${endpoint.id}`,
        { enabled: true },
        team.key,
      );
      expect(res.status).toBe(200);
    } else if (factory) {
      await factory.reapply();
    } else {
      await resend(endpoint.id, third!.id, team.key);
    }
    await pass(d2);
    expect(r.received).toHaveLength(2);

    answerD1(204);
    await d1.settled();
    // Delivered at its retry: the rest go, in order, each once.
    await pass(d2);
    await eventually(
      async () => (await messagesOf(endpoint.id)).every((m) => m.status === 'delivered'),
      'all delivered',
    );
    expect(r.received.slice(0, 2).map((x) => x.id)).toEqual([first!.id, first!.id]);
    expect(
      r.received
        .slice(2)
        .map((x) => x.id)
        .sort(),
    ).toEqual([second!.id, third!.id].sort());
    expect(errors).toEqual([]);
  });
});

describe('a resend on a failing endpoint', () => {
  it('brings its retry forward to now: the oldest message goes first', async () => {
    const d = dispatcher();
    const team = await t.newTeam(`resend-failing-${Date.now()}`);
    const { r, url } = await receiver();
    r.behaviour = (n) => (n === 1 ? 503 : 204);
    const { endpoint, secret } = await subscribe(url, team.key);
    r.secret = secret;
    await queue(team.team.id, [{}, {}, {}]);
    const start = clock.getTime();
    await pass(d);
    const [oldest, , youngest] = await messagesOf(endpoint.id);
    expect(oldest!.next_attempt_at!.getTime()).toBe(start + 5_000);

    // Long before the retry, the team resends the youngest message.
    clock = new Date(start + 1_000);
    await resend(endpoint.id, youngest!.id, team.key);
    await pass(d);
    await eventually(
      async () => (await messagesOf(endpoint.id)).every((m) => m.status === 'delivered'),
      'all delivered',
    );
    expect(r.received.slice(0, 2).map((x) => x.id)).toEqual([oldest!.id, oldest!.id]);
    expect(r.received).toHaveLength(4);
    expect(errors).toEqual([]);
  });
});

/**
 * A team whose endpoint refuses connections (the backlog's owner) and another whose endpoint receives
 * (`mine`), with a dispatcher whose claims and records are explained as they run (`read`: the rows of
 * the messages table each read).
 */
async function besideABacklog() {
  const claims = explaining(t.service.db, 'query', /WITH ready AS MATERIALIZED/, 'notification_messages');
  const records = explaining(
    claims.db,
    'query',
    /INSERT INTO notification_attempts/,
    'notification_messages',
  );
  const d = dispatcher({ db: records.db });
  const backlogTeam = await t.newTeam(`backlog-owner-${randomUUID()}`);
  const failing = (await subscribe(await closedPort(), backlogTeam.key)).endpoint;
  const team = await t.newTeam(`recorded-${randomUUID()}`);
  const { r, url } = await receiver();
  const mine = await subscribe(url, team.key);
  r.secret = mine.secret;
  return { claims, records, d, backlogTeam, failing, team, r, mine };
}

/**
 * Statistics of a calm spell: earlier tests' held-back messages gone, `history` written, then all of it
 * vacuumed and analysed — nothing pending, so the planner takes every index of pending messages for
 * empty (and no autovacuum during the test to take other statistics).
 */
async function calmSpell(history: () => Promise<unknown> = async () => undefined) {
  await t.service.db.execute(`ALTER TABLE notification_messages SET (autovacuum_enabled = off)`);
  closers.push(async () => {
    await t.service.db.execute(`ALTER TABLE notification_messages RESET (autovacuum_enabled)`);
  });
  await t.service.db.execute(`DELETE FROM notification_messages WHERE status = 'pending'`);
  await history();
  await t.service.db.execute(`VACUUM (ANALYZE) notification_messages`);
}

/** `count` runs of two messages each, all first messages made before any second one. */
async function queueRunsOfTwo(teamId: string, count: number) {
  const runs = Array.from({ length: count }, () => ({ run: randomUUID() }));
  await queue(teamId, [...runs, ...runs]);
}

/** The runs whose two messages were received out of the order they were made in. */
function outOfOrder(received: Received[]): number[][] {
  const byRun = new Map<string, number[]>();
  for (const x of received)
    byRun.set(x.body.data.run_id, [...(byRun.get(x.body.data.run_id) ?? []), x.body.data.n]);
  return [...byRun.values()].filter(([first, second]) => !(first! < second!));
}

describe('another endpoint’s backlog', () => {
  // A failing endpoint's pending messages (here 5,000, due, the endpoint held until its retry) are its
  // own: another endpoint's claim and record read the messages they take and record, not that backlog.
  // The statistics are those of a calm spell, when a vacuum found nothing pending (and the planner,
  // scaling what it found, thinks the partial indexes of pending messages still hold nothing); then
  // the backlog builds.
  it('is read by no claim or record of another endpoint', async () => {
    const { claims, records, d, backlogTeam, failing, team, r, mine } = await besideABacklog();
    const backlog = (status: string, from: number, count: number) =>
      t.service.db.execute(
        `INSERT INTO notification_messages (event_id, endpoint_id, team_id, type, payload, event_at, status, next_attempt_at)
         SELECT g, $1, $2, 'run.queued', '{}', now(), $3, CASE WHEN $3 = 'pending' THEN now() - interval '1 minute' END
           FROM generate_series($4::int, $4::int + $5::int - 1) g`,
        [failing.id, backlogTeam.team.id, status, from, count],
      );
    await calmSpell(() => backlog('delivered', 1_000_000, 20_000));
    await queue(team.team.id, [{}, {}, {}]);
    // The backlog, its endpoint failing and held until its next retry.
    await backlog('pending', 2_000_000, 5_000);
    await t.service.db.execute(
      `UPDATE notification_endpoints SET failing_since = $2, held_until = $3 WHERE id = $1`,
      [failing.id, clock, new Date(clock.getTime() + 3_600_000)],
    );
    claims.read.length = 0;

    await pass(d);
    expect(r.received).toHaveLength(3);
    expect((await messagesOf(mine.endpoint.id)).map((m) => m.status)).toEqual([
      'delivered',
      'delivered',
      'delivered',
    ]);
    // The claim that took the three (and any look after, finding nothing): each message it took read
    // twice (found, then returned), and one index entry for each endpoint that may go. The record.
    expect(claims.read.length).toBeGreaterThan(0);
    for (const read of claims.read) expect(read).toBeLessThanOrEqual(2 * 3 + 2);
    expect(records.read).toHaveLength(1);
    expect(records.read[0]).toBeLessThanOrEqual(3);
    expect(errors).toEqual([]);
  });
});

describe('another endpoint’s backlog, known to the statistics', () => {
  // The same, once statistics were taken with the backlog there (150,000 pending messages of a failing
  // endpoint, held until its retry, inserted before the other endpoint's): a claim that asked for
  // "any due message" of an endpoint was planned as a read of the table from its start — the whole
  // backlog, on every claim of every team.
  it('is read by no claim or record of another endpoint', async () => {
    const { claims, records, d, backlogTeam, failing, team, r } = await besideABacklog();
    await t.service.db.execute(
      `INSERT INTO notification_messages (event_id, endpoint_id, team_id, type, run_id, payload, event_at, next_attempt_at)
       SELECT g, $1, $2, 'run.queued', gen_random_uuid(), '{}', now(), now() - interval '1 minute'
         FROM generate_series(1, 150000) g`,
      [failing.id, backlogTeam.team.id],
    );
    await t.service.db.execute(
      `UPDATE notification_endpoints SET failing_since = $2, held_until = $3 WHERE id = $1`,
      [failing.id, clock, new Date(Date.now() + 3_600_000)],
    );
    await t.service.db.execute(`VACUUM (ANALYZE) notification_messages`);
    await queueRunsOfTwo(team.team.id, 40);
    claims.read.length = 0;

    await pass(d);
    await eventually(() => r.received.length === 80, 'all 80 received');
    expect(outOfOrder(r.received)).toEqual([]);
    // Each claim: each message it took read twice (found, then returned), one index entry for each
    // endpoint that may go. Each record: the messages it records.
    expect(claims.read.length).toBeGreaterThan(0);
    for (const read of claims.read) expect(read).toBeLessThanOrEqual(2 * 80 + 2);
    expect(records.read.length).toBeGreaterThan(0);
    for (const read of records.read) expect(read).toBeLessThanOrEqual(80);
    expect(errors).toEqual([]);
    // Its rounds wake it after each delivery: stopped, no pass of it runs on into the next test (and
    // claims that test's messages at that test's clock).
    await d.stop();
  });
});

describe('a failing endpoint whose oldest message waits for its retry', () => {
  // Its probe failed and it is held until the probe's retry — but an older message of its waits for a
  // later retry, and its newer messages are due. It goes when its oldest message is due, not before:
  // asked whether any message was due, it looked ready to every claim and took nothing (and each
  // claim read an entry more of it). Its oldest pending message is one entry of its queue: found
  // otherwise, each claim of every team read its history before it (20,000 delivered messages) or its
  // backlog (50,000 pending, sorted). And the messages a claim takes are fetched by their ids: joined,
  // under these statistics, they were found by hashing the whole table.
  it('is not ready, and no claim reads its backlog', async () => {
    const { claims, records, d, backlogTeam, failing, team, r } = await besideABacklog();
    await t.service.db.execute(
      `INSERT INTO notification_messages (event_id, endpoint_id, team_id, type, run_id, payload, event_at, status, next_attempt_at)
       SELECT g, $1, $2, 'run.queued', gen_random_uuid(), '{}', now(),
              CASE WHEN g <= 20000 THEN 'delivered' ELSE 'pending' END,
              CASE WHEN g <= 20000 THEN NULL WHEN g = 20001 THEN $3::timestamptz ELSE now() - interval '1 minute' END
         FROM generate_series(1, 70000) g`,
      [failing.id, backlogTeam.team.id, new Date(Date.now() + 3_600_000)],
    );
    await t.service.db.execute(
      `UPDATE notification_endpoints SET failing_since = now(), held_until = now() WHERE id = $1`,
      [failing.id],
    );
    await t.service.db.execute(`VACUUM (ANALYZE) notification_messages`);
    await queue(team.team.id, [{}, {}, {}]);
    claims.read.length = 0;

    await pass(d);
    await eventually(() => r.received.length === 3, 'all 3 received');
    expect(await attemptsOf(failing.id)).toBe(0);
    expect(claims.read.length).toBeGreaterThan(0);
    for (const read of claims.read) expect(read).toBeLessThanOrEqual(2 * 3 + 2);
    for (const read of records.read) expect(read).toBeLessThanOrEqual(3);
    expect(errors).toEqual([]);

    // Once its oldest message is due, that one goes, alone, through one entry of its queue.
    claims.read.length = 0;
    clock = new Date(Date.now() + 2 * 3_600_000);
    await pass(d);
    expect(await attemptsOf(failing.id)).toBe(1);
    expect(Math.max(...claims.read)).toBeLessThanOrEqual(2 * 1 + 2);
    await d.stop();
  });
});

describe('in order per run, under the statistics of a calm spell', () => {
  // A claim asks, of each message it takes, whether an earlier message of its run is still pending:
  // from that run's entries of the run-order index. Under statistics taken when nothing was pending
  // (so every index of pending messages looked empty), the planner answered it from another index —
  // all of the endpoint's pending messages, for each message taken: 45,000 rows for a claim of 300,
  // and a queue that grew as its claims slowed.
  it('reads only the messages it takes', async () => {
    const { claims, records, d, team, r } = await besideABacklog();
    await calmSpell();
    await queueRunsOfTwo(team.team.id, 150);
    claims.read.length = 0;

    await pass(d);
    await eventually(() => r.received.length === 300, 'all 300 received');
    expect(outOfOrder(r.received)).toEqual([]);
    expect(claims.read.length).toBeGreaterThan(0);
    for (const read of claims.read) expect(read).toBeLessThanOrEqual(2 * 300 + 2);
    for (const read of records.read) expect(read).toBeLessThanOrEqual(300);
    expect(errors).toEqual([]);
    await d.stop();
  });
});

describe('a record that comes after its lease was taken over', () => {
  // D1 claims the endpoint and its attempt hangs past the lease; D2 then claims it, delivers the
  // message and records that. D1's failure, recorded last, must not undo it: neither the message
  // (pending again, so sent again; or given up) nor the endpoint (failing, its run of failures, disabled).
  it.each([
    { what: 'a retry', schedule: SCHEDULE, disableAfter: 5 },
    { what: 'a message given up, the endpoint disabled', schedule: [0], disableAfter: 1 },
  ])(
    'changes nothing of the other dispatcher’s: would have been $what',
    async ({ schedule, disableAfter }) => {
      // Attempts that no timer of the sender ends: the test decides when D1's answer comes.
      const d1 = dispatcher({ timeoutMs: 60_000, schedule, disableAfter });
      const d2 = dispatcher({ timeoutMs: 60_000, schedule, disableAfter });
      const team = await t.newTeam(`late-${Date.now()}`);
      const { r, url } = await receiver();
      let answerD1!: (status: number) => void;
      const late = new Promise<number>((resolve) => (answerD1 = resolve));
      r.behaviour = (n) => (n === 1 ? late : 204);
      const { endpoint, secret } = await subscribe(url, team.key);
      r.secret = secret;
      await queue(team.team.id, [{}]);
      const start = clock.getTime();

      await d1.pump();
      await eventually(() => r.received.length === 1, 'D1’s attempt in flight');
      // D1's lease (twice the time limit, and 5 s) lapses; D2 claims the endpoint and delivers. It
      // releases the endpoint at the very instant D1's lease ended: the lease's time cannot tell the two
      // claims apart (the record checks the claim's id).
      clock = new Date(start + 125_000);
      await pass(d2);
      expect(r.received.map((x) => x.id)).toEqual([r.received[0]!.id, r.received[0]!.id]);
      const [delivered] = await messagesOf(endpoint.id);
      expect(delivered).toMatchObject({ status: 'delivered', attempts: 1 });
      const endpointRow = () =>
        t.service.db.query(
          `SELECT enabled, disabled_reason, failing_since, consecutive_failures, held_until
           FROM notification_endpoints WHERE id = $1`,
          [endpoint.id],
        );
      const released = await endpointRow();
      expect(released).toEqual([
        {
          enabled: true,
          disabled_reason: null,
          failing_since: null,
          consecutive_failures: 0,
          held_until: clock,
        },
      ]);

      // D1's answer at last: a 503, recorded after D2's delivery.
      clock = new Date(start + 126_000);
      answerD1(503);
      await d1.settled();
      expect(await messagesOf(endpoint.id)).toEqual([delivered]);
      expect(await endpointRow()).toEqual(released);
      expect(disabled).toEqual([]);
      // Its attempt was made, so it is logged.
      const log = await t.service.db.query<{ succeeded: boolean; status_code: number }>(
        `SELECT succeeded, status_code FROM notification_attempts WHERE endpoint_id = $1 ORDER BY attempted_at`,
        [endpoint.id],
      );
      expect(log).toEqual([
        { succeeded: false, status_code: 503 },
        { succeeded: true, status_code: 204 },
      ]);
      // Nothing goes again, now or when D1's retry would have been due.
      clock = new Date(start + 1_000_000);
      await pass(d1);
      await pass(d2);
      expect(r.received).toHaveLength(2);
      expect(errors).toEqual([]);
    },
  );
});
