// A harness that probes its network as an attacker would (test/security/network.test.ts). Its prompt
// is JSON: { tcp: {name: "host:port"}, sockets: {name: "/path"}, proxied: {name: "host:port"},
// stub: "http://127.0.0.1:port" }. It tries each, then ends with its findings as the result message:
// `REACH {"tcp": {name: "reached" | error}, "sockets": …, "proxied": {name: status line | error}, …}`.
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

/** The proxy's (HTTPS_PROXY) answer to CONNECT host:port: its status line, or why there was none. */
function throughProxy(target) {
  const proxy = process.env.HTTPS_PROXY;
  if (!proxy) return Promise.resolve('no proxy');
  const { hostname, port } = new URL(proxy);
  return new Promise((resolve) => {
    const s = connect({ host: hostname, port: Number(port) });
    let head = '';
    s.setTimeout(TIMEOUT_MS * 3, () => (s.destroy(), resolve(head.split('\r\n')[0] || 'timeout')));
    s.once('connect', () => s.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`));
    s.on('data', (d) => {
      head += d.toString('latin1');
      if (head.includes('\r\n')) {
        s.destroy();
        resolve(head.split('\r\n')[0]);
      }
    });
    s.once('error', (err) => resolve(err.code ?? err.message));
  });
}

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
  const found = { tcp: {}, sockets: {}, proxied: {}, stub: {} };
  for (const [name, target] of Object.entries(p.tcp ?? {})) {
    const i = target.lastIndexOf(':');
    found.tcp[name] = await reach({ host: target.slice(0, i), port: Number(target.slice(i + 1)) });
  }
  for (const [name, path] of Object.entries(p.sockets ?? {})) found.sockets[name] = await reach({ path });
  for (const [name, target] of Object.entries(p.proxied ?? {}))
    found.proxied[name] = await throughProxy(target);
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
