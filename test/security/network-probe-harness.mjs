// A harness that probes its network as an attacker would (test/security/network.test.ts). Its prompt
// is JSON: { tcp: {name: "host:port" | "[v6]:port"}, sockets: {name: "/path" | "@abstract name"},
// proxied: {name: "host:port"}, proxiedGet: {name: "http://host:port/"}, stub: "http://127.0.0.1:port" }.
// It tries each (proxied: CONNECT through HTTPS_PROXY; proxiedGet: an absolute-form GET through
// HTTP_PROXY), then ends with its findings as the result message: `REACH {"tcp": {name: "reached" |
// error}, "sockets": …, "proxied": {name: status line, and the body of a refusal | error}, …}`.
// Plain Node, no dependencies: it must run wherever a harness runs.
import { connect } from 'node:net';
import { request } from 'node:http';
import { createInterface } from 'node:readline';

const TIMEOUT_MS = 3000;

/** "reached" if a connection opened (TCP or a socket's path), else why not. */
function reach(options) {
  return new Promise((resolve) => {
    const s = connect(options);
    const done = (what) => {
      s.destroy();
      resolve(what);
    };
    s.setTimeout(TIMEOUT_MS, () => done('timeout'));
    s.once('connect', () => done('reached'));
    s.once('error', (err) => done(err.code ?? err.message));
  });
}

/**
 * The proxy's answer to `request` (a request head): its status line; for anything but a tunnel or a
 * forwarded answer, with ` — ` and the proxy's reason (its body, which names why). Or why there was none.
 */
function askProxy(proxy, request) {
  if (!proxy) return Promise.resolve('no proxy');
  const { hostname, port } = new URL(proxy);
  return new Promise((resolve) => {
    const s = connect({ host: hostname, port: Number(port) });
    let answer = '';
    const done = () => {
      s.destroy();
      const [head, body = ''] = answer.split('\r\n\r\n');
      const status = head.split('\r\n')[0];
      // A refusal is the proxy's own (text/plain, `factoryd egress: …`); anything else is the target's.
      resolve(!status ? 'no answer' : /^factoryd egress:/.test(body) ? `${status} — ${body.trim()}` : status);
    };
    s.setTimeout(TIMEOUT_MS * 3, done);
    s.once('connect', () => s.write(request));
    s.on('data', (d) => {
      answer += d.toString('latin1');
      if (/^HTTP\/1\.1 200 Connection Established\r\n\r\n/.test(answer)) done(); // a tunnel: nothing more comes
    });
    s.once('close', done);
    s.once('error', (err) => resolve(err.code ?? err.message));
  });
}

/** CONNECT host:port through HTTPS_PROXY. */
const throughProxy = (target) =>
  askProxy(process.env.HTTPS_PROXY, `CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`);

/** GET http://host:port/ (absolute form) through HTTP_PROXY. */
const getThroughProxy = (url) =>
  askProxy(process.env.HTTP_PROXY, `GET ${url} HTTP/1.1\r\nHost: ${new URL(url).host}\r\n\r\n`);

/** A POST to the model stub, as an SDK would send it: `via` "direct" (NO_PROXY) or "proxy" (absolute form). */
function callStub(base, via) {
  const url = new URL('/v1/messages', base);
  const proxy = process.env.HTTP_PROXY ? new URL(process.env.HTTP_PROXY) : undefined;
  if (via === 'proxy' && !proxy) return Promise.resolve('no proxy');
  const target =
    via === 'proxy'
      ? { host: proxy.hostname, port: Number(proxy.port), path: url.href }
      : { host: url.hostname, port: Number(url.port), path: url.pathname };
  return new Promise((resolve) => {
    const req = request(
      {
        ...target,
        method: 'POST',
        headers: { 'content-type': 'application/json', host: url.host },
        timeout: TIMEOUT_MS,
      },
      (res) => {
        let body = '';
        res.on('data', (d) => (body += d));
        res.on('end', () => resolve(`${res.statusCode} ${body.slice(0, 60)}`));
      },
    );
    req.once('timeout', () => req.destroy(new Error('timeout')));
    req.once('error', (err) => resolve(err.code ?? err.message));
    req.end(JSON.stringify({ model: 'stub', messages: [{ role: 'user', content: 'hi' }] }));
  });
}

async function probe(p) {
  const found = { tcp: {}, sockets: {}, proxied: {}, proxiedGet: {}, stub: {} };
  for (const [name, target] of Object.entries(p.tcp ?? {})) {
    const i = target.lastIndexOf(':');
    const host = target.slice(0, i).replace(/^\[|\]$/g, '');
    found.tcp[name] = await reach({ host, port: Number(target.slice(i + 1)) });
  }
  // `@name`: the abstract socket `\0name` (Linux), which has no path to hide: only a namespace stops it.
  for (const [name, path] of Object.entries(p.sockets ?? {}))
    found.sockets[name] = await reach({ path: path.replace(/^@/, '\0') });
  for (const [name, target] of Object.entries(p.proxied ?? {}))
    found.proxied[name] = await throughProxy(target);
  for (const [name, url] of Object.entries(p.proxiedGet ?? {}))
    found.proxiedGet[name] = await getThroughProxy(url);
  if (p.stub) {
    found.stub.direct = await callStub(p.stub, 'direct');
    found.stub.proxy = await callStub(p.stub, 'proxy');
  }
  return found;
}

createInterface({ input: process.stdin }).once('line', (line) => {
  const { prompt } = JSON.parse(line);
  void probe(JSON.parse(prompt)).then((found) => {
    process.stdout.write(
      `${JSON.stringify({ type: 'result', status: 'succeeded', message: `REACH ${JSON.stringify(found)}` })}\n`,
    );
    process.exit(0);
  });
});
