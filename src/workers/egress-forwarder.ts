/**
 * The egress forwarder: runs inside a harness's sandbox (its own network namespace, nothing but its
 * loopback) as the parent of the harness command, and is the sandbox's only way out.
 *
 *   node egress-forwarder.js SOCKET PORT [LOCAL=HOST:PORT …] -- COMMAND [ARG …]
 *
 * 127.0.0.1:PORT is the proxy (HTTPS_PROXY): each connection is piped to SOCKET, factoryd's egress
 * proxy for this run (egress-proxy.ts), which reads the request. Each LOCAL port on 127.0.0.1 is a
 * trusted loopback destination outside (a model provider's base URL on this machine): a CONNECT
 * to HOST:PORT is made through the proxy, then the bytes flow as they are.
 *
 * Once every port listens, COMMAND starts with this process's stdio; this process ends with it, with
 * its exit code or signal. Signals meant for the harness reach it through its process group; this
 * process ignores them and waits for it. Plain Node built-ins only: it starts with every run.
 */
import { spawn } from 'node:child_process';
import { createConnection, createServer, type Server, type Socket } from 'node:net';

const args = process.argv.slice(2);
const split = args.indexOf('--');
const [socket, port, ...maps] = args.slice(0, split);
const command = args.slice(split + 1);

function fail(message: string): never {
  process.stderr.write(`factoryd egress forwarder: ${message}\n`);
  process.exit(126);
}

if (split < 2 || !command.length) fail('usage: SOCKET PORT [LOCAL=HOST:PORT …] -- COMMAND');

/** Pipes `client` to the proxy; with `connect`, after the proxy answered that CONNECT with 200. */
function toProxy(client: Socket, connect?: string): void {
  const proxy = createConnection(socket!);
  const close = () => {
    client.destroy();
    proxy.destroy();
  };
  client.on('error', close);
  proxy.on('error', close);
  client.once('close', close);
  proxy.once('close', close);
  if (!connect) {
    client.pipe(proxy);
    proxy.pipe(client);
    return;
  }
  client.pause();
  proxy.write(`CONNECT ${connect} HTTP/1.1\r\nHost: ${connect}\r\n\r\n`);
  let head = Buffer.alloc(0);
  const onData = (chunk: Buffer) => {
    head = Buffer.concat([head, chunk]);
    const end = head.indexOf('\r\n\r\n');
    if (end < 0) return;
    proxy.off('data', onData);
    if (!/^HTTP\/1\.[01] 200/.test(head.toString('latin1'))) return close();
    const rest = head.subarray(end + 4);
    if (rest.length) client.write(rest);
    client.pipe(proxy);
    proxy.pipe(client);
    client.resume();
  };
  proxy.on('data', onData);
}

function listen(localPort: number, connect?: string): Promise<Server> {
  const server = createServer((client) => toProxy(client, connect));
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(localPort, '127.0.0.1', () => resolve(server));
  });
}

async function main(): Promise<void> {
  const servers = await Promise.all([
    listen(Number(port)),
    ...maps.map((m) => {
      const eq = m.indexOf('=');
      return listen(Number(m.slice(0, eq)), m.slice(eq + 1));
    }),
  ]);
  for (const s of servers) s.unref();
  for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(sig, () => undefined);
  const child = spawn(command[0]!, command.slice(1), { stdio: 'inherit' });
  child.once('error', (err) => fail(`cannot start the harness: ${err.message}`));
  child.once('exit', (code, signal) => {
    for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.removeAllListeners(sig);
    if (signal) process.kill(process.pid, signal);
    process.exit(code ?? 1);
  });
}

main().catch((err: Error) => fail(`cannot listen: ${err.message}`));
