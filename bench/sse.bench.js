// bench/sse: the cost of live streams on one replica. Webhook ingress (bench/ingress's (b): token
// webhook, 20 automations, 1 run per delivery) is measured three times: with 0 open streams (the
// baseline), with 1,000 idle team streams (GET /api/v1/agent/runs/events) held by a client process,
// and with the same 1,000 streams busy: a marker run is created in the watched team every 200 ms, so
// each stream receives ~5 events/s; then the busy streams alone, for the service's CPU time per event
// delivered. The fan-out latency is from a marker's commit to the moment the
// last of the 1,000 streams received its QUEUED. The machine may be shared: the three phases run in
// rounds (BENCH_SSE_ROUNDS, default 3), each ratio is against its own round's baseline, and the
// service's CPU time per request (this process) is printed too, as it depends less on the neighbours.
// The streams watch a team of their own: the ingress's runs are read by the replica's one reader
// (and fanned out by team) but reach no stream. Prints figures; never fails on a time.
import { fork } from 'node:child_process';
import http from 'node:http';
import { loadavg } from 'node:os';
import { clearInterval, setInterval } from 'node:timers';
import { newUid } from '../dist/common/ids.js';
import { AuthService } from '../dist/auth/auth.service.js';
import { RunStreamsService } from '../dist/notifications/run-streams.service.js';
import { RunsRepository } from '../dist/runs/runs.repository.js';
import { benchDatabase, benchService, CONNECTIONS, DURATION, fmt, load } from './ingress-kit.js';

const STREAMS = Number(process.env.BENCH_SSE_STREAMS ?? 1000);
const MARKER_EVERY_MS = Number(process.env.BENCH_SSE_MARKER_MS ?? 200);
const ROUNDS = Number(process.env.BENCH_SSE_ROUNDS ?? 3);

if (process.env.BENCH_SSE_CLIENT) await clients(JSON.parse(process.env.BENCH_SSE_CLIENT));
else await main();

async function main() {
  const database = await benchDatabase();
  const rounds = [];
  const latencies = [];
  try {
    const { service, db, webhook } = await benchService(database.url, database.dir);
    const secret = newUid() + newUid();
    const hook = await webhook('token', null, secret);
    const ingress = {
      url: `${service.url}/webhooks/w/${hook}`,
      headers: { authorization: `Bearer ${secret}` },
    };
    const auth = service.app.get(AuthService);
    const watched = await auth.createTeam('watchers');
    const { key } = await auth.createApiKey({ teams: [watched], scopes: ['runs:read'], name: 'sse-bench' });
    const [principal] = await db.query(`SELECT id FROM principals LIMIT 1`);
    const runs = service.app.get(RunsRepository);
    const streams = service.app.get(RunStreamsService);
    const marker = () =>
      runs.create(
        {
          teamId: watched.id,
          title: 'marker',
          prompt: 'marker',
          source: 'API',
          creatorId: principal?.id ?? null,
          agentConfig: { worker_host: 'nobody' },
        },
        new Date(),
      );

    // Warm-up (JIT, caches, pool) so that the first baseline is not the coldest phase.
    await load({ ...ingress, seconds: Math.min(DURATION, 3) });
    for (let round = 0; round < ROUNDS; round++) {
      const r = {};
      r.none = await measured(ingress);
      const child = fork(new URL(import.meta.url).pathname, [], {
        env: {
          ...process.env,
          BENCH_SSE_CLIENT: JSON.stringify({
            url: `${service.url}/api/v1/agent/runs/events`,
            key,
            streams: STREAMS,
          }),
        },
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      });
      const fromChild = (type) =>
        new Promise((resolve) => child.on('message', (m) => m.type === type && resolve(m)));
      await fromChild('ready');
      r.idle = await measured(ingress);

      const committed = new Map();
      const markers = setInterval(async () => committed.set(await marker(), Date.now()), MARKER_EVERY_MS);
      r.busy = await measured(ingress);
      // The streams alone, without ingress: the service's CPU per event delivered to one stream.
      const before = process.cpuUsage();
      const from = committed.size;
      await new Promise((resolve) => setTimeout(resolve, DURATION * 1000));
      const used = process.cpuUsage(before);
      r.perEventUs = (used.user + used.system) / ((committed.size - from) * STREAMS);
      clearInterval(markers);
      const received = fromChild('received');
      child.send({ type: 'report', runs: [...committed.keys()] });
      const { lastAt, open, clientUs } = await received;
      r.clientUs = clientUs;
      child.kill();
      r.open = open;
      r.markers = committed.size;
      r.seenByAll = 0;
      for (const [id, at] of Object.entries(lastAt))
        if (committed.has(id)) {
          latencies.push(at - committed.get(id));
          r.seenByAll++;
        }
      rounds.push(r);
      // The next round's baseline starts with every stream closed.
      while (streams.openStreams) await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await service.stop();
  } catch (err) {
    console.error(err);
    process.exitCode = 1;
  } finally {
    await database.drop();
  }
  if (!rounds.length) return;
  const perSecond = (1000 / MARKER_EVERY_MS).toFixed(0);
  console.log(
    `sse benchmark: ingress ${CONNECTIONS} connections, ${DURATION} s per phase, ${rounds.length} rounds (none, idle, busy), loopback; ${STREAMS} team streams; load average ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  );
  const phases = [
    ['none', 'ingress, 0 streams (baseline)'],
    ['idle', `ingress, ${STREAMS} idle streams`],
    ['busy', `ingress, ${STREAMS} busy streams (${perSecond} ev/s each)`],
  ];
  for (const [phase, label] of phases)
    for (const [i, r] of rounds.entries())
      console.log(
        `${fmt(`${label} #${i + 1}`, r[phase])}   service CPU ${r[phase].cpuUs.toFixed(0)} µs/request, ${r[phase].cpuMs.toFixed(0)} ms/s`,
      );
  // Each ratio against the baseline of its own round; the median of the rounds.
  const ratio = (phase, of) => median(rounds.map((r) => of(r[phase]) / of(r.none))).toFixed(2);
  const rps = (r) => r.rps;
  const cpu = (r) => r.cpuUs;
  console.log(
    `ratio throughput (median of rounds) idle/none: ${ratio('idle', rps)}   busy/none: ${ratio('busy', rps)}`,
  );
  console.log(
    `ratio service CPU per request (median of rounds) idle/none: ${ratio('idle', cpu)}   busy/none: ${ratio('busy', cpu)}`,
  );
  console.log(
    `CPU per event delivered to one stream: service (streams alone, no ingress) ${rounds.map((r) => r.perEventUs.toFixed(1)).join(', ')} µs; the bench's client process (same cores) ${rounds.map((r) => r.clientUs.toFixed(1)).join(', ')} µs`,
  );
  latencies.sort((a, b) => a - b);
  const seen = rounds.reduce((n, r) => n + r.seenByAll, 0);
  const markers = rounds.reduce((n, r) => n + r.markers, 0);
  console.log(
    `fan-out latency, commit -> received on all ${STREAMS} streams: p50 ${pct(latencies, 0.5)} ms   p99 ${pct(latencies, 0.99)} ms   (${seen} of ${markers} markers seen by every stream; streams open at the end of each round: ${rounds.map((r) => r.open).join(', ')})`,
  );
}

/** One load phase, with the service's CPU time (this process) per request and per second. */
async function measured(target) {
  const before = process.cpuUsage();
  const r = await load(target);
  const used = process.cpuUsage(before);
  const us = used.user + used.system;
  return { ...r, cpuUs: us / r.total, cpuMs: us / 1000 / r.seconds };
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

function pct(sorted, q) {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] : NaN;
}

/** The client process: holds `streams` open streams, notes when each run's QUEUED reached the last of them. */
async function clients({ url, key, streams }) {
  const seen = new Map(); // run id -> [streams that saw it, when the last did]
  let open = 0;
  let events = 0;
  let cpuFrom;
  const agent = new http.Agent({ keepAlive: false, maxSockets: Infinity });
  const one = () =>
    new Promise((resolve, reject) => {
      const req = http.get(
        url,
        { agent, headers: { authorization: `Bearer ${key}`, accept: 'text/event-stream' } },
        (res) => {
          if (res.statusCode !== 200) return reject(new Error(`stream answered ${res.statusCode}`));
          open++;
          resolve();
          let buffer = '';
          res.setEncoding('utf8');
          res.on('data', (chunk) => {
            buffer += chunk;
            let at;
            while ((at = buffer.indexOf('\n\n')) >= 0) {
              const frame = buffer.slice(0, at);
              buffer = buffer.slice(at + 2);
              const data = /^data: (.*)$/m.exec(frame);
              if (!data) continue;
              const change = JSON.parse(data[1]);
              if (change.state !== 'QUEUED') continue;
              const s = seen.get(change.run_id) ?? [0, 0];
              s[0]++;
              events++;
              s[1] = Date.now();
              seen.set(change.run_id, s);
            }
          });
          res.on('close', () => open--);
        },
      );
      req.on('error', reject);
    });
  for (let i = 0; i < streams; i += 100)
    await Promise.all(Array.from({ length: Math.min(100, streams - i) }, one));
  cpuFrom = process.cpuUsage();
  process.send({ type: 'ready' });
  process.on('message', (m) => {
    if (m.type !== 'report') return;
    const lastAt = {};
    for (const id of m.runs) {
      const s = seen.get(id);
      if (s && s[0] === streams) lastAt[id] = s[1];
    }
    const cpu = process.cpuUsage(cpuFrom);
    process.send({ type: 'received', lastAt, open, clientUs: (cpu.user + cpu.system) / events });
  });
}
