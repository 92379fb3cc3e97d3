// bench/notifications: signed notifications out while the ingress is loaded — do they keep pace, how
// late do they arrive, what does a failing endpoint cost others, and what do dispatchers in processes
// of their own do. One database, one run; every figure beside its baseline from the same run:
//   (a) floor: a bare Fastify route that inserts one row through `pg` (bench/ingress-kit.js)
//   (e) factoryd ingress, two teams' `token` webhooks loaded together, 1 run per delivery, no endpoint:
//       the capacity; measured first and again last (the machine drifts), the baseline is their mean
//   (b) as fast as it goes, team B's endpoint receiving every event of B (two per delivery:
//       delivery.accepted and run.queued): messages made and sent per second, the queue (its depth:
//       B's pending messages) every second of the load and its trend (does it grow?), state change ->
//       receipt p50/p99
//   (h) half of (e)'s capacity for BENCH_SUSTAIN_SECONDS (60): the same, the queue every 5 s
//   (i) idle: one delivery at a time, 300 ms apart: state change -> receipt
//   (r) receiving, (c) refusing, (d) tarpit, (f) 5xx, (s) slow (answers after BENCH_SLOW_MS, 1 s):
//       team A's endpoint so, beside B's healthy one; (r), A's endpoint taking every message at once, is
//       what an endpoint of A costs B when it fails at nothing. By default (BENCH_ISOLATION=toggled)
//       each in one load during which A's endpoint is switched on and off in phases, its "on" phases
//       read against its "off" ones (see toggledLoad). With BENCH_ISOLATION=between, the earlier
//       method: each case also printed over (r)'s of its round, and each against the mean of the baselines (A without an
//       endpoint) taken just before and just after it, since the database grows and the machine drifts between
//       cases: as fast as it goes (the ingress, and the CPU the service and PostgreSQL spent per
//       delivery), then at half the capacity of the first of those baselines (B's latency); and what A's
//       endpoint got (attempts, connections); all of it
//       BENCH_ISOLATION_ROUNDS (1) times in turn, each round against its own baselines: the median
//       ratio of the rounds and their range, beside the method's noise (each baseline between two
//       others against their mean)
//   (p1), (p2): one, then two dispatchers as processes of their own (`factoryd serve --role
//       notifications`), the service's own stopped: half capacity, then as fast as it goes
// NOTIFICATIONS_TIMEOUT_MS is 2000 here, so a tarpit's attempts time out during its case. The state
// change's time is the event's `timestamp`, taken in its transaction; receipt is when the receiver
// (a child process, bench/notification-receivers.js) read the request. CPU per delivery counts this
// process (the service, its dispatcher when it runs here) and the database's backends, not the load
// generators, receivers or dispatcher processes. The isolation target (every team's ingress and B's
// latency within 10 % when A's endpoint fails) is read against A without an endpoint: an endpoint's
// messages are made and stored whether it answers or not (B's healthy one costs the same in every
// case); each team's ingress is also printed against its own in (e), no endpoint at all. Prints
// figures; never fails on a time.
import { fork, spawn } from 'node:child_process';
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { join } from 'node:path';
import { newUid } from '../dist/common/ids.js';
import { NotificationDispatcher } from '../dist/notifications/notification-dispatcher.js';
import { NotificationEndpoints } from '../dist/notifications/notification-endpoints.service.js';
import { NotificationsRepository } from '../dist/notifications/notifications.repository.js';
import {
  benchDatabase,
  benchService,
  CONNECTIONS,
  cpuMeter,
  DURATION,
  fmt,
  load,
  measureFloor,
} from './ingress-kit.js';

const SUSTAIN = Number(process.env.BENCH_SUSTAIN_SECONDS ?? 60);
/** BENCH_NOTIFICATIONS_CASES: the cases to run beside (e), e.g. `b,d` (default: all of b h i r c d f s p). */
const ALL_CASES = ['b', 'h', 'i', 'r', 'c', 'd', 'f', 's', 'p'];
const CASES = new Set(
  (process.env.BENCH_NOTIFICATIONS_CASES ?? ALL_CASES.join(',')).split(',').map((c) => c.trim()),
);
const unknownCases = [...CASES].filter((c) => !ALL_CASES.includes(c));
if (unknownCases.length) {
  console.error(
    `BENCH_NOTIFICATIONS_CASES: no case ${unknownCases.map((c) => `"${c}"`).join(', ')}; the cases are ${ALL_CASES.join(', ')} ((e) always runs)`,
  );
  process.exit(2);
}
/** BENCH_ISOLATION_ROUNDS: how many times the isolation cases (r c d f s) run in turn (default 1). */
const ROUNDS = Number(process.env.BENCH_ISOLATION_ROUNDS ?? 1);
if (!Number.isInteger(ROUNDS) || ROUNDS < 1) {
  console.error(
    `BENCH_ISOLATION_ROUNDS: "${process.env.BENCH_ISOLATION_ROUNDS}" is not a whole number of rounds, 1 or more`,
  );
  process.exit(2);
}
/**
 * BENCH_ISOLATION: how the isolation cases are read. `toggled` (the default): each case as one load during which
 * A's endpoint is switched on and off every BENCH_PHASE_SECONDS (12), BENCH_PHASE_PAIRS (8) pairs in
 * the order of phaseIsOn, its "on" phases read against its "off" ones — the same database,
 * the same minute of the machine, no baseline from another load. `between`: each case as a load of
 * its own between two baselines (A without an endpoint), BENCH_ISOLATION_ROUNDS times.
 */
const ISOLATION = process.env.BENCH_ISOLATION ?? 'toggled';
const PHASE_SECONDS = Number(process.env.BENCH_PHASE_SECONDS ?? 12);
const PHASE_PAIRS = Number(process.env.BENCH_PHASE_PAIRS ?? 8);
/**
 * Whether A's endpoint is on in phase k: the Thue–Morse order (on off off on, off on on off, off on on
 * off, on off off on…; on where k has an even number of ones in binary). Any drift through the load
 * that is linear (or, over eight pairs, up to cubic) weighs on both sides alike, and neither side
 * always has the last phase — where the autovacuum of the messages table, which the load fills, tends
 * to land. (The order before, on-off off-on repeated, always ended "on".)
 */
function phaseIsOn(k) {
  let ones = 0;
  for (let bits = k; bits; bits >>= 1) ones += bits & 1;
  return ones % 2 === 0;
}
/**
 * Seconds at a phase's start that are not read: what A's endpoint was doing in the phase before (a
 * round in flight ends within twice NOTIFICATIONS_TIMEOUT_MS, 2 × 2 s here) belongs to neither.
 */
const SETTLE_SECONDS = 4;
for (const [name, ok, expected] of [
  ['BENCH_ISOLATION', ['between', 'toggled'].includes(ISOLATION), '"toggled" or "between"'],
  [
    'BENCH_PHASE_SECONDS',
    Number.isInteger(PHASE_SECONDS) && PHASE_SECONDS > SETTLE_SECONDS,
    `a whole number of seconds above ${SETTLE_SECONDS}`,
  ],
  ['BENCH_PHASE_PAIRS', Number.isInteger(PHASE_PAIRS) && PHASE_PAIRS >= 2, 'a whole number, 2 or more'],
])
  if (!ok) {
    console.error(`${name}: "${process.env[name]}" is not ${expected}`);
    process.exit(2);
  }
const DRAIN_LIMIT_MS = 180_000;
/**
 * BENCH_TRACE=1: the dispatcher's work timed phase by phase in the isolation cases (printed beside each
 * phase's figures): its claims (how many, how many took something, their mean time), its records and
 * rounds (mean time, messages a round), and how long the messages it took had waited since their
 * state change. How the claims that read a failing endpoint's backlog were found.
 */
const TRACE = process.env.BENCH_TRACE ? traceDispatcher() : undefined;
function traceDispatcher() {
  const seen = [];
  const timed = (proto, name, what) => {
    const original = proto[name];
    proto[name] = async function (...args) {
      const started = performance.now();
      const result = await original.apply(this, args);
      seen.push({ at: Date.now(), name, ms: performance.now() - started, ...what(args, result) });
      return result;
    };
  };
  timed(NotificationsRepository.prototype, 'claimDue', (_, rows) => ({
    n: rows.length,
    waited: rows.reduce((sum, m) => sum + (Date.now() - m.event_at.getTime()), 0),
  }));
  timed(NotificationsRepository.prototype, 'recordAttempts', () => ({}));
  timed(NotificationDispatcher.prototype, 'round', ([group]) => ({ n: group.length }));
  const mean = (xs, f) => (xs.length ? (xs.reduce((sum, x) => sum + f(x), 0) / xs.length).toFixed(1) : '-');
  return {
    phase(from, to) {
      const of = (name) => seen.filter((x) => x.name === name && x.at >= from && x.at < to);
      const [claims, records, rounds] = [of('claimDue'), of('recordAttempts'), of('round')];
      const taken = claims.reduce((sum, x) => sum + x.n, 0);
      return (
        `claims ${claims.length} (${claims.filter((x) => x.n).length} took some) ${mean(claims, (x) => x.ms)} ms, ` +
        `records ${mean(records, (x) => x.ms)} ms, rounds ${mean(rounds, (x) => x.ms)} ms (${mean(rounds, (x) => x.n)} messages), ` +
        `waited for the claim ${(claims.reduce((sum, x) => sum + x.waited, 0) / Math.max(taken, 1)).toFixed(1)} ms`
      );
    },
  };
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const receivers = fork(new URL('./notification-receivers.js', import.meta.url).pathname, [], {
  stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
});
await new Promise((resolve) => receivers.once('message', resolve));
const ask = (m) =>
  new Promise((resolve) => {
    receivers.once('message', resolve);
    receivers.send(m);
  });
const ports = await ask({ ask: 'ports' });

const database = await benchDatabase();
const dispatchers = [];
const out = [];
const say = (line) => {
  out.push(line);
  console.error(`bench/notifications: ${line}`);
};
const load1 = loadavg()[0];
try {
  const floor = await measureFloor(database.url);
  const { service, db, team } = await benchService(database.url, database.dir, {
    NOTIFICATIONS_ALLOW_PRIVATE_URLS: 'true',
    NOTIFICATIONS_TIMEOUT_MS: '2000',
  });
  const cpu = cpuMeter((sql) => db.query(sql));
  const endpoints = service.app.get(NotificationEndpoints);
  const teams = {};
  for (const name of ['A', 'B']) {
    const t = await team(`team-${name}`);
    const token = newUid() + newUid();
    teams[name] = {
      ...t,
      auth: { team: { id: t.teamId } },
      token,
      hook: await t.webhook('token', null, token),
    };
  }
  const target = (t) => ({
    url: `${service.url}/webhooks/w/${t.hook}`,
    headers: { authorization: `Bearer ${t.token}` },
  });
  /**
   * Both teams' webhooks loaded at once, half the connections (and of `rate`) each; as fast as it goes
   * (no `rate`), also the CPU per delivery.
   */
  let loaded = false;
  const ingress = async (
    rate,
    seconds = DURATION,
    onMeasuring = () => undefined,
    onLoading = () => undefined,
  ) => {
    // Each load but the first starts from a vacuumed, checkpointed database: the dead rows and dirty
    // pages one case leaves (delivered messages' old versions) are not
    // the next case's work, which made two baselines in a row differ by a third. Not the first: the
    // empty tables' statistics would say "no rows" to the plans of a load that fills them (the first
    // (e) ran at a third of its speed).
    if (loaded) {
      await db.query(`VACUUM (ANALYZE)`);
      await db.query(`CHECKPOINT`);
    }
    loaded = true;
    onLoading();
    if (!rate) await cpu.start();
    let measuring = 0;
    const [a, b] = await Promise.all(
      [teams.A, teams.B].map((t) =>
        load(
          {
            ...target(t),
            connections: CONNECTIONS / 2,
            seconds,
            ...(rate && { rate: Math.round(rate / 2) }),
          },
          // Both generators past their warm-up.
          { onMeasuring: () => ++measuring === 2 && onMeasuring() },
        ),
      ),
    );
    const r = {
      rps: a.rps + b.rps,
      rpsA: a.rps,
      rpsB: b.rps,
      p50: Math.max(a.p50, b.p50),
      p99: Math.max(a.p99, b.p99),
      total: a.total + b.total,
      non2xx: a.non2xx + b.non2xx,
    };
    if (!rate) r.cpu = await cpu.stop(r.total + a.warmupTotal + b.warmupTotal);
    return r;
  };
  const created = await endpoints.create(teams.B.auth, {
    name: 'healthy',
    url: `http://127.0.0.1:${ports.healthy}/hook`,
  });
  const healthy = created.endpoint.id;
  await ask({ ask: 'secret', secret: created.secret });
  await endpoints.update(teams.B.auth, healthy, { enabled: false });

  const queue = async () => {
    const [q] = await db.query(
      `SELECT count(*)::int AS pending FROM notification_messages WHERE endpoint_id = $1 AND status = 'pending'`,
      [healthy],
    );
    return q.pending;
  };
  /**
   * Ingress at `rate` (undefined: as fast as it goes) with B's endpoint receiving; the queue sampled
   * every `everyMs` (`samples`), and those of the measured load, from the end of the warm-up to a last
   * one as the load ends, with their times (`measured`: what `trend` reads); then waits until B's
   * messages are all delivered. Returns the figures.
   */
  const receiving = async (rate, seconds = DURATION, everyMs = 1000, onMeasuring = () => undefined) => {
    await ask({ ask: 'take' });
    // From the load's start, after the vacuum before it (which takes seconds once the tables are big).
    let t0 = Infinity;
    const samples = [];
    const measured = [];
    let measuredFrom = Infinity;
    let loading = true;
    const sample = async () => {
      const at = Date.now();
      const depth = await queue();
      if (at >= t0) samples.push(depth);
      if (at >= measuredFrom) measured.push({ at, depth });
    };
    let wake = () => undefined;
    const sampler = (async () => {
      while (loading) {
        await sample();
        await Promise.race([sleep(everyMs), new Promise((resolve) => (wake = resolve))]);
      }
    })();
    const r = await ingress(
      rate,
      seconds,
      () => {
        // The measured load starts: its first sample now.
        measuredFrom = Date.now();
        wake();
        onMeasuring();
      },
      () => (t0 = Date.now()),
    );
    const t1 = Date.now();
    loading = false;
    wake();
    await sampler;
    await sample();
    let drainMs = 0;
    while ((await queue()) > 0 && drainMs < DRAIN_LIMIT_MS) {
      await sleep(50);
      drainMs = Date.now() - t1;
    }
    const [made] = await db.query(
      `SELECT count(*)::int AS n FROM notification_messages WHERE endpoint_id = $1 AND event_at BETWEEN $2 AND $3`,
      [healthy, new Date(t0), new Date(t1)],
    );
    const taken = await ask({ ask: 'take' });
    const latencies = [];
    let sentInLoad = 0;
    for (let i = 0; i < taken.got.length; i += 2) {
      latencies.push(taken.got[i + 1]);
      if (taken.got[i] <= t1) sentInLoad++;
    }
    latencies.sort((x, y) => x - y);
    const pct = (p) =>
      latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))] ?? 0;
    return {
      ...r,
      made: made.n / ((t1 - t0) / 1000),
      sent: sentInLoad / ((t1 - t0) / 1000),
      received: latencies.length,
      samples,
      measured,
      p50: pct(50),
      p99: pct(99),
      drainMs,
      got: taken.got,
      duplicates: taken.duplicates,
      forged: taken.forged,
    };
  };
  const cpuOf = (r) => (r.cpu ? r.cpu.nodeUs + r.cpu.pgUs : 0);
  const perTeam = (r) => `A ${r.rpsA.toFixed(0)}, B ${r.rpsB.toFixed(0)} req/s`;
  /**
   * Does the queue grow? Its depth sampled during the measured load (after the warm-up; the last
   * sample as the load ends): the first and the last, the mean of each half, and the least-squares
   * slope in messages a second. Made/sent per second cannot say: the messages made in the load's last
   * moments are sent just after it.
   */
  const trend = (measured) => {
    const n = measured.length;
    const mean = (xs) => xs.reduce((x, y) => x + y, 0) / Math.max(xs.length, 1);
    const xs = measured.map((m) => (m.at - measured[0].at) / 1000);
    const ys = measured.map((m) => m.depth);
    const xm = mean(xs);
    const ym = mean(ys);
    let num = 0;
    let den = 0;
    xs.forEach((x, i) => {
      num += (x - xm) * (ys[i] - ym);
      den += (x - xm) ** 2;
    });
    const half = Math.floor(n / 2);
    return {
      n,
      first: ys[0],
      last: ys.at(-1),
      firstHalf: mean(ys.slice(0, half)),
      secondHalf: mean(ys.slice(n - half)),
      slope: den ? num / den : 0,
    };
  };
  const trendText = (r) => {
    const t = trend(r.measured);
    return (
      `queue (B's pending messages) over the measured load (${t.n} samples): first ${t.first}, at its end ${t.last}; ` +
      `mean of the first half ${t.firstHalf.toFixed(0)}, of the second ${t.secondHalf.toFixed(0)}; ` +
      `trend ${t.slope >= 0 ? '+' : ''}${t.slope.toFixed(1)} messages/s`
    );
  };
  const cpuText = (r) =>
    r.cpu ? `; CPU/delivery ${cpuOf(r)} µs (service ${r.cpu.nodeUs}, PostgreSQL ${r.cpu.pgUs})` : '';
  const describe = (label, r) =>
    `${label}: ingress ${r.rps.toFixed(0)} req/s (${perTeam(r)})${cpuText(r)}; B's messages made ${r.made.toFixed(0)}/s, sent ${r.sent.toFixed(0)}/s during the load; ` +
    `queue (B's pending messages) ${r.samples.join(' ')}; ` +
    `state change -> receipt p50 ${r.p50} ms, p99 ${r.p99} ms (${r.received} received, ${r.duplicates} twice, ${r.forged} unverified); ` +
    `drained ${r.drainMs} ms after the load`;

  const results = {};
  results.e1 = await ingress();
  say(fmt('(e) no endpoint (first)', results.e1) + cpuText(results.e1) + `; ${perTeam(results.e1)}`);
  const half = Math.round(results.e1.rps / 2);
  await endpoints.update(teams.B.auth, healthy, { enabled: true });
  if (CASES.has('b')) {
    results.b = await receiving();
    say(describe('(b) as fast as it goes', results.b));
  }
  if (CASES.has('h')) {
    results.h = await receiving(half, SUSTAIN, 5000);
    say(describe(`(h) ${half} req/s (half of (e)) for ${SUSTAIN} s, queue every 5 s`, results.h));
  }

  // (i) idle: one delivery at a time.
  if (CASES.has('i')) {
    await ask({ ask: 'take' });
    for (let i = 0; i < 20; i++) {
      await fetch(target(teams.B).url, {
        method: 'POST',
        headers: { ...target(teams.B).headers, 'content-type': 'application/json' },
        body: JSON.stringify({ kind: 'k0', n: i, action: 'opened', idle: newUid() }),
      });
      await sleep(300);
    }
    await sleep(1000);
    const idle = (await ask({ ask: 'take' })).got.filter((_, i) => i % 2 === 1).sort((x, y) => x - y);
    results.i = { p50: idle[Math.floor(idle.length / 2)], max: idle.at(-1), n: idle.length };
    say(
      `(i) idle, one delivery every 300 ms: ${results.i.n} received, state change -> receipt p50 ${results.i.p50} ms, max ${results.i.max} ms`,
    );
  }

  // Isolation: A's endpoint (receiving, then failing ways) beside B's healthy one, each between two baselines.
  const kinds = [
    ['r', 'receiving', ports.answering, 'answering'],
    ['c', 'refusing', ports.refusing, undefined],
    ['d', 'tarpit', ports.tarpit, 'tarpit'],
    ['f', '5xx', ports.failing5xx, 'failing5xx'],
    ['s', 'slow', ports.slow, 'slow'],
  ].filter(([key]) => CASES.has(key));
  // Each case between two baselines (A without an endpoint), the one after a case the one before the
  // next: the database grows through the run (every case leaves A's messages pending), so a case is
  // judged against the mean of the two around it, not against the one before it alone. Latency at half
  // the capacity of the first baseline (B receiving): half of (e) came near full capacity by the later
  // cases.
  let paceRate;
  const baselineCase = async (label) => {
    const fast = await receiving();
    paceRate ??= Math.round(fast.rps / 2);
    const base = { fast, paced: await receiving(paceRate) };
    say(describe(`${label}: A without an endpoint, as fast as it goes`, base.fast));
    say(describe(`${label}: A without an endpoint, ${paceRate} req/s`, base.paced));
    return base;
  };
  // BENCH_ISOLATION_ROUNDS times in turn (c, baseline, d, baseline…), each round's ratios against its
  // own baselines: one 20 s sample of a latency moves by a tenth between two baselines in a row, the
  // size of the effect to be judged; the median of the rounds, and their range, say more.
  const baselines = [];
  let before =
    kinds.length && ISOLATION === 'between' ? await baselineCase('(isolation) baseline 0') : undefined;
  if (before) baselines.push(before);
  for (let round = 1; round <= (ISOLATION === 'between' ? ROUNDS : 0); round++)
    for (const [key, name, port, counted] of kinds) {
      const n = baselines.length;
      const label = ROUNDS > 1 ? `${key}, round ${round}` : key;
      const a = (
        await endpoints.create(teams.A.auth, {
          name: `${name}-${round}`,
          url: `http://127.0.0.1:${port}/hook`,
        })
      ).endpoint.id;
      const countsBefore = await ask({ ask: 'counts' });
      const fast = await receiving();
      const paced = await receiving(paceRate);
      const [got] = await db.query(
        `SELECT (SELECT count(*)::int FROM notification_attempts WHERE endpoint_id = $1) AS attempts,
              (SELECT count(*)::int FROM notification_messages WHERE endpoint_id = $1 AND status = 'pending') AS pending,
              (SELECT count(*)::int FROM notification_messages WHERE endpoint_id = $1 AND status = 'delivered') AS delivered`,
        [a],
      );
      const countsAfter = await ask({ ask: 'counts' });
      const connections = counted
        ? `, ${countsAfter[counted].connections - countsBefore[counted].connections} connections`
        : '';
      say(describe(`(${label}) A ${name}, as fast as it goes`, fast));
      say(describe(`(${label}) A ${name}, ${paceRate} req/s`, paced));
      say(
        `(${label}) A's ${name} endpoint: ${got.attempts} attempts logged, ${got.delivered} delivered, ${got.pending} pending${connections}`,
      );
      await endpoints.update(teams.A.auth, a, { enabled: false });
      const after = await baselineCase(`(isolation) baseline ${n}`);
      baselines.push(after);
      (results[key] ??= []).push({ before, after, fast, paced, got });
      before = after;
    }

  /**
   * One load (at `rate`; undefined: as fast as it goes) with A's endpoint `a` switched on and off in
   * phases of PHASE_SECONDS from the end of the warm-up (off before it), PHASE_PAIRS pairs in the
   * order of phaseIsOn. Each phase is read from
   * SETTLE_SECONDS after its switch to its end: the runs each team's deliveries started in it (from
   * the database), the CPU of the service and PostgreSQL in it, and B's messages whose state change
   * fell in it (state change -> receipt).
   */
  const toggledLoad = async (a, rate) => {
    const phases = [];
    const seconds = 2 * PHASE_PAIRS * PHASE_SECONDS;
    let switching = Promise.resolve();
    const r = await receiving(rate, seconds + 1, 1000, () => {
      const start = Date.now();
      switching = (async () => {
        for (let k = 0; k < 2 * PHASE_PAIRS; k++) {
          const on = phaseIsOn(k);
          await sleep(start + k * PHASE_SECONDS * 1000 - Date.now());
          await endpoints.update(teams.A.auth, a, { enabled: on });
          await sleep(start + (k * PHASE_SECONDS + SETTLE_SECONDS) * 1000 - Date.now());
          const meter = cpuMeter((sql) => db.query(sql));
          await meter.start();
          const from = Date.now();
          await sleep(start + (k + 1) * PHASE_SECONDS * 1000 - Date.now());
          const used = await meter.stop(1);
          phases.push({ on, from, to: Date.now(), cpuUs: used.nodeUs + used.pgUs, pgUs: used.pgUs });
        }
        await endpoints.update(teams.A.auth, a, { enabled: false });
      })();
    });
    await switching;
    for (const p of phases) {
      const rows = await db.query(
        `SELECT team_id, count(*)::int AS n FROM runs WHERE created_at >= $1 AND created_at < $2 GROUP BY team_id`,
        [new Date(p.from), new Date(p.to)],
      );
      const runs = (t) => rows.find((row) => row.team_id === t.teamId)?.n ?? 0;
      p.runsA = runs(teams.A);
      p.runsB = runs(teams.B);
      p.latencies = [];
    }
    for (let i = 0; i < r.got.length; i += 2) {
      const changedAt = r.got[i] - r.got[i + 1];
      phases.find((p) => changedAt >= p.from && changedAt < p.to)?.latencies.push(r.got[i + 1]);
    }
    for (const p of phases) {
      const depths = r.measured.filter((m) => m.at >= p.from && m.at < p.to).map((m) => m.depth);
      p.queue = depths.length ? Math.round(depths.reduce((x, y) => x + y, 0) / depths.length) : 0;
      const sorted = [...p.latencies].sort((x, y) => x - y);
      p.p50 = sorted[Math.floor(sorted.length / 2)] ?? 0;
      p.p99 = sorted[Math.min(sorted.length - 1, Math.floor(0.99 * sorted.length))] ?? 0;
      if (TRACE) p.trace = TRACE.phase(p.from, p.to);
    }
    return phases;
  };
  /** Phases' figures pooled: each team's runs a second, CPU per delivery, B's latency p50 and p99. */
  const pooled = (phases) => {
    const seconds = phases.reduce((sum, p) => sum + (p.to - p.from), 0) / 1000;
    const runsA = phases.reduce((sum, p) => sum + p.runsA, 0);
    const runsB = phases.reduce((sum, p) => sum + p.runsB, 0);
    const latencies = phases.flatMap((p) => p.latencies).sort((x, y) => x - y);
    const pct = (q) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0;
    return {
      rps: (runsA + runsB) / seconds,
      rpsA: runsA / seconds,
      rpsB: runsB / seconds,
      cpu: phases.reduce((sum, p) => sum + p.cpuUs, 0) / Math.max(runsA + runsB, 1),
      p50: pct(0.5),
      p99: pct(0.99),
      n: latencies.length,
    };
  };
  /**
   * The same figures read phase by phase: the median over the phases of each phase's own. One phase
   * that something else lands on (a vacuum of the messages table) moves a pooled figure; this one not.
   */
  const phaseByPhase = (phases) => {
    const median = (f) => {
      const xs = phases.map(f).sort((x, y) => x - y);
      const mid = xs.length / 2;
      return xs.length % 2 ? xs[Math.floor(mid)] : (xs[mid - 1] + xs[mid]) / 2;
    };
    const seconds = (p) => (p.to - p.from) / 1000;
    return {
      rps: median((p) => (p.runsA + p.runsB) / seconds(p)),
      rpsA: median((p) => p.runsA / seconds(p)),
      rpsB: median((p) => p.runsB / seconds(p)),
      cpu: median((p) => p.cpuUs / Math.max(p.runsA + p.runsB, 1)),
      p50: median((p) => p.p50),
      p99: median((p) => p.p99),
    };
  };
  /** `x`'s figures over `y`'s: ingress and CPU from the fast load, latency from the paced one. */
  const toggledRatios = (x, y) => ({
    rps: x.fast.rps / y.fast.rps,
    rpsA: x.fast.rpsA / y.fast.rpsA,
    rpsB: x.fast.rpsB / y.fast.rpsB,
    cpu: x.fast.cpu / y.fast.cpu,
    p50: x.paced.p50 / y.paced.p50,
    p99: x.paced.p99 / y.paced.p99,
  });
  const toggledText = (q) =>
    `ingress ${q.rps.toFixed(2)}× (A ${q.rpsA.toFixed(2)}×, B ${q.rpsB.toFixed(2)}×), CPU/delivery ${q.cpu.toFixed(2)}×; ` +
    `B at ${paceRate} req/s p50 ${q.p50.toFixed(2)}×, p99 ${q.p99.toFixed(2)}×`;
  if (ISOLATION === 'toggled' && kinds.length) {
    // The paced loads' rate: half of what the service does as fast as it goes with B receiving.
    paceRate = Math.round((await receiving()).rps / 2);
    for (const [key, name, port] of kinds) {
      const a = (
        await endpoints.create(teams.A.auth, {
          name: `${name}-toggled`,
          url: `http://127.0.0.1:${port}/hook`,
        })
      ).endpoint.id;
      await endpoints.update(teams.A.auth, a, { enabled: false });
      const loads = { fast: await toggledLoad(a), paced: await toggledLoad(a, paceRate) };
      const of = (pick, read = pooled) => ({
        fast: read(loads.fast.filter(pick)),
        paced: read(loads.paced.filter(pick)),
      });
      const on = of((p) => p.on);
      const off = of((p) => !p.on);
      const [onByPhase, offByPhase] = [of((p) => p.on, phaseByPhase), of((p) => !p.on, phaseByPhase)];
      // What the method reads when nothing changed: half the "off" phases against the other half
      // (alternate ones, so both halves span the load), and so for the "on" phases.
      const alternate = (state, parity) => {
        let i = 0;
        return (p) => p.on === state && i++ % 2 === parity;
      };
      const noiseOff = toggledRatios(of(alternate(false, 0)), of(alternate(false, 1)));
      const noiseOn = toggledRatios(of(alternate(true, 0)), of(alternate(true, 1)));
      const noiseOffByPhase = toggledRatios(
        of(alternate(false, 0), phaseByPhase),
        of(alternate(false, 1), phaseByPhase),
      );
      const [got] = await db.query(
        `SELECT (SELECT count(*)::int FROM notification_attempts WHERE endpoint_id = $1) AS attempts,
                (SELECT count(*)::int FROM notification_messages WHERE endpoint_id = $1 AND status = 'pending') AS pending,
                (SELECT count(*)::int FROM notification_messages WHERE endpoint_id = $1 AND status = 'delivered') AS delivered`,
        [a],
      );
      const figures = (f) =>
        `ingress ${f.fast.rps.toFixed(0)} req/s (A ${f.fast.rpsA.toFixed(0)}, B ${f.fast.rpsB.toFixed(0)}), CPU/delivery ${f.fast.cpu.toFixed(0)} µs; ` +
        `B at ${paceRate} req/s p50 ${f.paced.p50} ms, p99 ${f.paced.p99} ms (${f.paced.n} messages)`;
      (results.toggled ??= []).push(
        `isolation toggled (${key}) ${name}, ${PHASE_PAIRS} pairs of ${PHASE_SECONDS} s phases (each read from ${SETTLE_SECONDS} s after its switch), ` +
          `as fast as it goes and at ${paceRate} req/s: A's endpoint on: ${figures(on)}; off: ${figures(off)}; ` +
          `on against off (target: within 10 %): ${toggledText(toggledRatios(on, off))}; ` +
          `the method's noise, alternate "off" phases against each other: ${toggledText(noiseOff)}, "on" phases: ${toggledText(noiseOn)}; ` +
          `read phase by phase (the median of the phases' figures), on against off: ${toggledText(toggledRatios(onByPhase, offByPhase))} ` +
          `(B p50 ${onByPhase.paced.p50} / ${offByPhase.paced.p50} ms), its noise (alternate "off" phases): ${toggledText(noiseOffByPhase)}; ` +
          `A's endpoint: ${got.attempts} attempts logged, ${got.delivered} delivered, ${got.pending} pending`,
      );
      say(results.toggled.at(-1));
      for (const [label, phases] of Object.entries(loads))
        say(
          `(${key}) toggled, ${label}: each phase (A's endpoint on or off): B's p50 ms / queue (B's pending messages, mean of its samples) / cores busy (service and PostgreSQL, of which PostgreSQL): ` +
            phases
              .map(
                (p) =>
                  `${p.on ? 'on' : 'off'} ${p.p50}/${p.queue}/${(p.cpuUs / (p.to - p.from) / 1000).toFixed(2)} (${(p.pgUs / (p.to - p.from) / 1000).toFixed(2)})`,
              )
              .join(', '),
        );
      if (TRACE)
        for (const [label, phases] of Object.entries(loads))
          for (const [k, p] of phases.entries())
            say(
              `(${key}) toggled, ${label}, phase ${k + 1} (${p.on ? 'on' : 'off'}): the dispatcher's ${p.trace}`,
            );
    }
  }

  await endpoints.update(teams.B.auth, healthy, { enabled: false });
  results.e2 = await ingress();
  say(fmt('(e) no endpoint (last)', results.e2) + cpuText(results.e2) + `; ${perTeam(results.e2)}`);

  // Dispatchers of their own.
  const processes = CASES.has('p') ? [1, 2] : [];
  await endpoints.update(teams.B.auth, healthy, { enabled: true });
  if (processes.length) await service.app.get(NotificationDispatcher).stop();
  const startDispatcher = () =>
    new Promise((resolve, reject) => {
      const child = spawn(
        process.execPath,
        [new URL('../dist/cli/main.js', import.meta.url).pathname, 'serve', '--role', 'notifications'],
        {
          env: {
            ...process.env,
            DATABASE_URL: database.url,
            DATA_DIR: join(database.dir, 'data'),
            LOG_LEVEL: 'silent',
            NOTIFICATIONS_ALLOW_PRIVATE_URLS: 'true',
            NOTIFICATIONS_TIMEOUT_MS: '2000',
          },
          stdio: ['ignore', 'pipe', 'inherit'],
        },
      );
      dispatchers.push(child);
      child.stdout.on('data', (d) => (/dispatcher up/.test(String(d)) ? resolve(child) : undefined));
      child.on('exit', (code) => reject(new Error(`dispatcher exited ${code}`)));
    });
  for (const n of processes) {
    while (dispatchers.length < n) await startDispatcher();
    const paced = await receiving(half);
    const fast = await receiving();
    results[`p${n}`] = { paced, fast };
    say(describe(`(p${n}) ${n} dispatcher process(es), ${half} req/s`, paced));
    say(describe(`(p${n}) ${n} dispatcher process(es), as fast as it goes`, fast));
  }

  const baseline = (results.e1.rps + results.e2.rps) / 2;
  const baselineA = (results.e1.rpsA + results.e2.rpsA) / 2;
  const baselineB = (results.e1.rpsB + results.e2.rpsB) / 2;
  const ratio = (x, y) => (x / y).toFixed(2);
  /** Each team's ingress against its own in (e), the mean of first and last. */
  const teamsVsE = (r) =>
    `A ${r.rpsA.toFixed(0)} req/s ${ratio(r.rpsA, baselineA)}× (e), B ${r.rpsB.toFixed(0)} req/s ${ratio(r.rpsB, baselineB)}× (e)`;
  console.log(
    `notifications benchmark: ${CONNECTIONS} connections, ${DURATION} s per case (${SUSTAIN} s sustained), loopback; load average at the start ${load1.toFixed(2)}, at the end ${loadavg()[0].toFixed(2)}`,
  );
  console.log(fmt('(a) floor: Fastify + one pg INSERT', floor));
  for (const line of out) console.log(line);
  console.log(
    `\nbaseline (e), mean of first and last: ${baseline.toFixed(0)} req/s (A ${baselineA.toFixed(0)}, B ${baselineB.toFixed(0)})`,
  );
  if (results.b)
    console.log(
      `throughput: (b) ingress ${ratio(results.b.rps, baseline)}× (e) (${teamsVsE(results.b)}), CPU/delivery ${ratio(cpuOf(results.b), cpuOf(results.e1))}× (e first); ` +
        `${trendText(results.b)} (target: the queue does not grow; B's messages made ${results.b.made.toFixed(0)}/s, sent ${results.b.sent.toFixed(0)}/s)`,
    );
  if (results.h)
    console.log(
      `sustained (h) at half capacity for ${SUSTAIN} s: ${trendText(results.h)} (target: the queue does not grow)`,
    );
  if (results.h)
    console.log(
      `latency at half capacity (h): p50 ${results.h.p50} ms, p99 ${results.h.p99} ms (target ≤ 1000)`,
    );
  if (results.i)
    console.log(`latency idle (i): p50 ${results.i.p50} ms, max ${results.i.max} ms (target ≤ 250)`);
  const mean2 = (x, y) => (x + y) / 2;
  /** A load's figures against the mean of two others': the isolation ratios. */
  const against = (r, x, y) => ({
    rps: r.fast.rps / mean2(x.fast.rps, y.fast.rps),
    rpsA: r.fast.rpsA / mean2(x.fast.rpsA, y.fast.rpsA),
    rpsB: r.fast.rpsB / mean2(x.fast.rpsB, y.fast.rpsB),
    cpu: cpuOf(r.fast) / mean2(cpuOf(x.fast), cpuOf(y.fast)),
    p50: r.paced.p50 / mean2(x.paced.p50, y.paced.p50),
    p99: r.paced.p99 / mean2(x.paced.p99, y.paced.p99),
  });
  /** Each ratio's median over the rounds, and (more than one) its range. */
  const spread = (ratios, k) => {
    const xs = ratios.map((q) => q[k]).sort((x, y) => x - y);
    const mid = xs.length % 2 ? xs[(xs.length - 1) / 2] : mean2(xs[xs.length / 2 - 1], xs[xs.length / 2]);
    return `${mid.toFixed(2)}×` + (xs.length > 1 ? ` (${xs[0].toFixed(2)}–${xs.at(-1).toFixed(2)})` : '');
  };
  const ratiosText = (ratios) =>
    `ingress ${spread(ratios, 'rps')} (A ${spread(ratios, 'rpsA')}, B ${spread(ratios, 'rpsB')}), CPU/delivery ${spread(ratios, 'cpu')}; ` +
    `B at ${paceRate} req/s p50 ${spread(ratios, 'p50')}, p99 ${spread(ratios, 'p99')}`;
  for (const line of results.toggled ?? []) console.log(line);
  for (const [key, name] of ISOLATION === 'between' ? kinds : []) {
    const rounds = results[key];
    for (const [i, r] of rounds.entries()) {
      const base = {
        paced: {
          p50: mean2(r.before.paced.p50, r.after.paced.p50),
          p99: mean2(r.before.paced.p99, r.after.paced.p99),
        },
      };
      console.log(
        `isolation (${key}) ${name}${ROUNDS > 1 ? `, round ${i + 1}` : ''}: ingress ${r.fast.rps.toFixed(0)} req/s; ` +
          `B at ${paceRate} req/s p50 ${r.paced.p50} ms against ${base.paced.p50.toFixed(0)}, p99 ${r.paced.p99} against ${base.paced.p99.toFixed(0)} ms; ` +
          `against (e), no endpoint at all: ${teamsVsE(r.fast)}`,
      );
    }
    console.log(
      `isolation (${key}) ${name}, against A without an endpoint (each round against the mean of its baselines before and after; ` +
        `${ROUNDS > 1 ? `the median of ${ROUNDS} rounds and their range` : 'one round'}; target: within 10 %): ` +
        ratiosText(rounds.map((r) => against(r, r.before, r.after))),
    );
    // What the failure itself costs: each round's ratios over (r)'s of the same round.
    if (key !== 'r' && results.r)
      console.log(
        `isolation (${key}) ${name}, against A receiving (r) (each round's ratios over (r)'s of the same round): ` +
          ratiosText(
            rounds.map((r, i) => {
              const q = against(r, r.before, r.after);
              const ref = against(results.r[i], results.r[i].before, results.r[i].after);
              return Object.fromEntries(Object.keys(q).map((k) => [k, q[k] / ref[k]]));
            }),
          ),
      );
  }
  // What the method reads when nothing changes: each baseline between two others against their mean.
  if (baselines.length >= 3)
    console.log(
      `isolation, the method's noise: ${baselines.length - 2} baselines (A without an endpoint) each against the two around it: ` +
        ratiosText(baselines.slice(1, -1).map((b, i) => against(b, baselines[i], baselines[i + 2]))),
    );
  for (const n of processes) {
    const r = results[`p${n}`];
    console.log(
      `scale-out (p${n}) ${n} dispatcher process(es): at half capacity p50 ${r.paced.p50} ms, p99 ${r.paced.p99} ms; as fast as it goes ingress ${ratio(r.fast.rps, baseline)}× (e), ` +
        `the API process's CPU/delivery ${r.fast.cpu.nodeUs} µs` +
        (results.b ? ` against ${results.b.cpu.nodeUs} µs with its own dispatcher (b), ` : ', ') +
        `${trendText(r.fast)}; ${r.paced.duplicates + r.fast.duplicates} received twice`,
    );
  }
  for (const d of dispatchers) d.kill('SIGTERM');
  await Promise.all(
    dispatchers.map((d) => new Promise((r) => (d.exitCode === null ? d.once('exit', r) : r()))),
  );
  await service.stop();
} catch (err) {
  console.error(err);
  process.exitCode = 1;
} finally {
  for (const d of dispatchers) if (d.exitCode === null) d.kill('SIGKILL');
  await database.drop();
  receivers.kill();
}
