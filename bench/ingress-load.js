// The ingress benchmarks' load generator, run as a child process (bench/ingress-kit.js `load`) so it
// does not share the servers' event loop: autocannon against one target, its figures as JSON on
// stdout. With `collect`, it also keeps each 202's delivery id and counts 503s without Retry-After.
import { createHmac } from 'node:crypto';
import autocannon from 'autocannon';

const spec = JSON.parse(process.env.BENCH_TARGET);
const accepted = [];
let unavailableWithoutRetryAfter = 0;
let n = 0;
const options = (seconds, measured) => ({
  url: spec.url,
  connections: spec.connections,
  duration: seconds,
  ...(spec.rate && { overallRate: spec.rate }),
  method: 'POST',
  requests: [
    {
      setupRequest: (req) => {
        const body = JSON.stringify({ kind: 'k0', n: n++, nonce: Math.random(), action: 'opened' });
        const headers = { ...spec.headers, 'content-type': 'application/json' };
        if (spec.githubSecret) {
          headers['x-hub-signature-256'] =
            `sha256=${createHmac('sha256', spec.githubSecret).update(body).digest('hex')}`;
        }
        return { ...req, method: 'POST', headers, body };
      },
      ...(spec.collect &&
        measured && {
          onResponse: (status, body, _context, headers) => {
            if (status === 202) accepted.push(JSON.parse(body).delivery_id);
            if (status === 503 && !headers['retry-after']) unavailableWithoutRetryAfter++;
          },
        }),
    },
  ],
});
// The warm-up's bodies are unique too (`n` runs on), so none of the measured ones is a Duplicate.
const warm = spec.warmup > 0 ? await autocannon(options(spec.warmup, false)) : undefined;
// The measured run starts now (its parent may sample what the load does from here on).
process.send?.('measuring');
const result = await autocannon(options(spec.seconds, true));
const statuses = Object.fromEntries(
  Object.entries(result.statusCodeStats).map(([code, s]) => [code, s.count]),
);
process.stdout.write(
  JSON.stringify({
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    total: result.requests.total,
    warmupTotal: warm?.requests.total ?? 0,
    non2xx: result.non2xx + result.errors + result.timeouts,
    errors: result.errors,
    timeouts: result.timeouts,
    seconds: result.duration,
    statuses,
    ...(spec.collect && { accepted, unavailableWithoutRetryAfter }),
  }),
  // A pipe's write may still be pending: exit once it is out.
  () => process.exit(0),
);
