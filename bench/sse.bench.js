// bench/sse: the cost of live streams on one replica. Webhook ingress (bench/ingress's (b): token
// webhook, 20 automations, 1 run per delivery) is measured with 0 open streams (the baseline) and
// with 1,000 open team streams (GET /api/v1/agent/runs/events) held by a client process. During the
// second run, a marker run is created in the watched team every 200 ms; the fan-out latency is from
// its commit to the moment the last of the 1,000 streams received its QUEUED.
// The streams watch a team of their own: the ingress's runs are read by the replica's one reader
// (and fanned out by team) but reach no stream. Prints figures; never fails on a time.
import { fork } from 'node:child_process';
import http from 'node:http';
import { clearInterval, setInterval } from 'node:timers';
import { newUid } from '../dist/common/ids.js';
import { AuthService } from '../dist/auth/auth.service.js';
import { RunsRepository } from '../dist/runs/runs.repository.js';
import { benchDatabase, benchService, CONNECTIONS, DURATION, fmt, load } from './ingress-kit.js';

const STREAMS = Number(process.env.BENCH_SSE_STREAMS ?? 1000);
const MARKER_EVERY_MS = Number(process.env.BENCH_SSE_MARKER_MS ?? 200);

if (process.env.BENCH_SSE_CLIENT) await clients(JSON.parse(process.env.BENCH_SSE_CLIENT));
else await main();

async function main() {
  const database = await benchDatabase();
  const results = {};
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

    results.without = await load(ingress);

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
    const ready = fromChild('ready');
    await ready;

    const runs = service.app.get(RunsRepository);
    const committed = new Map();
    const running = load(ingress);
    const markers = setInterval(async () => {
      const id = await runs.create(
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
      committed.set(id, Date.now());
    }, MARKER_EVERY_MS);
    results.with = await running;
    clearInterval(markers);
    const received = fromChild('received');
    child.send({ type: 'report', runs: [...committed.keys()] });
    const { lastAt, open } = await received;
    child.kill();
    const latencies = Object.entries(lastAt)
      .filter(([id]) => committed.has(id))
      .map(([id, at]) => at - committed.get(id))
      .sort((a, b) => a - b);
    results.fanOut = {
      n: latencies.length,
      of: committed.size,
      p50: pct(latencies, 0.5),
      p99: pct(latencies, 0.99),
      open,
    };
    await service.stop();
  } catch (err) {
    console.error(err);
    process.exitCode = 1;
  } finally {
    await database.drop();
  }
  if (!results.with) return;
  console.log(
    `sse benchmark: ingress ${CONNECTIONS} connections, ${DURATION} s each, loopback; ${STREAMS} team streams`,
  );
  console.log(fmt('ingress, 0 streams (baseline)', results.without));
  console.log(fmt(`ingress, ${STREAMS} open streams`, results.with));
  console.log(
    `ratio throughput with/without streams: ${(results.with.rps / results.without.rps).toFixed(2)}`,
  );
  const f = results.fanOut;
  console.log(
    `fan-out latency, commit -> received on all ${f.open} streams: p50 ${f.p50} ms   p99 ${f.p99} ms   (${f.n} of ${f.of} markers seen by every stream)`,
  );
}

function pct(sorted, q) {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] : NaN;
}

/** The client process: holds `streams` open streams, notes when each run's QUEUED reached the last of them. */
async function clients({ url, key, streams }) {
  const seen = new Map(); // run id -> [streams that saw it, when the last did]
  let open = 0;
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
  process.send({ type: 'ready' });
  process.on('message', (m) => {
    if (m.type !== 'report') return;
    const lastAt = {};
    for (const id of m.runs) {
      const s = seen.get(id);
      if (s && s[0] === streams) lastAt[id] = s[1];
    }
    process.send({ type: 'received', lastAt, open });
  });
}
