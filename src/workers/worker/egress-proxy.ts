/**
 * factoryd's egress proxy: the one way out of a sandboxed harness's network namespace (docs/security.md,
 * "A harness's network"). It runs in the worker process; each run gets a Unix socket of its own
 * (`open`), bound into its sandbox, so a connection's team and run are known from the socket it
 * came in on. Inside, the forwarder (bin/egress-forwarder.pl) turns the sandbox's own loopback port
 * into connections to that socket.
 *
 * It speaks HTTP CONNECT (any TCP, TLS included: the harness talks TLS to the real host) and plain
 * HTTP forwarding (`GET http://host/path`). Each destination is checked against the policy
 * (egress-policy.ts), resolved, every address checked, and the address that was checked is the
 * one connected to (no DNS-rebinding window). Every connection is logged, allowed or refused, with
 * its byte counts; never its path, headers or body.
 *
 * A backend other than the launcher's (Docker) uses it the same way: `open` a channel, bind
 * `channel.socket` into the container at EGRESS_SOCKET_INSIDE, start the command under
 * `forwarderCommand(…)` and give it `egressEnvironment(…)`.
 */
import { lookup } from 'node:dns/promises';
import { chmodSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createConnection, createServer, isIP, type Server, type Socket } from 'node:net';
import { networkInterfaces } from 'node:os';
import { join } from 'node:path';
import { fromRoot } from '../../common/paths.js';
import { reachableCopy } from '../../common/shared-runtime.js';
import {
  egressDecision,
  refusedAddress,
  type EgressPolicy,
  type EgressRule,
} from '../../common/egress-policy.js';
import { egressRoot } from '../launcher/sandbox.js';

/** One connection a harness asked for, as logged. */
export interface EgressEntry {
  team: string;
  run: string;
  host: string;
  port: number;
  allowed: boolean;
  /** Why it was refused, or why it ended early. */
  reason?: string;
  /** The address connected to. */
  address?: string;
  /** Bytes from the harness to the destination, and back. */
  bytesOut: number;
  bytesIn: number;
}

/** Who a channel's connections belong to, and what this run may reach beyond the policy (its environment's hosts). */
export interface EgressRun {
  team: string;
  run: string;
  allow?: EgressRule[];
}

/** A run's way out: a socket only its harness reaches (owner set by the launcher), closed after the run. */
export interface EgressChannel {
  /** The socket's path on this machine. */
  socket: string;
  close(): Promise<void>;
}

/** Where the run's socket appears inside a sandbox or container. */
export const EGRESS_SOCKET_INSIDE = '/run/factoryd/egress.sock';

/** The request line and headers of one proxy request: at most this much. */
const MAX_HEAD = 16 * 1024;
const CONNECT_TIMEOUT_MS = 10_000;

export class EgressProxy {
  private dir?: string;
  private count = 0;
  private readonly servers = new Set<Server>();

  constructor(
    readonly policy: EgressPolicy,
    private readonly log: (entry: EgressEntry) => void,
  ) {}

  /** A socket for one run's harness, listening until `close`. */
  async open(run: EgressRun): Promise<EgressChannel> {
    // Short paths (a Unix socket's path is at most 107 bytes), in a folder others may pass, not list.
    this.dir ??= mkdtempSync(join(egressRoot(), `${process.pid}-`));
    chmodSync(this.dir, 0o711);
    const socket = join(this.dir, `${++this.count}.sock`);
    rmSync(socket, { force: true });
    const sockets = new Set<Socket>();
    const server = createServer((client) => {
      sockets.add(client);
      client.once('close', () => sockets.delete(client));
      this.serve(run, client);
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(socket, () => resolve());
    });
    chmodSync(socket, 0o600); // its owner becomes the harness's user (launcher.ts)
    this.servers.add(server);
    return {
      socket,
      close: async () => {
        this.servers.delete(server);
        for (const s of sockets) s.destroy();
        await new Promise((resolve) => server.close(resolve));
        rmSync(socket, { force: true });
      },
    };
  }

  async stop(): Promise<void> {
    await Promise.all([...this.servers].map((s) => new Promise((resolve) => s.close(resolve))));
    this.servers.clear();
    if (this.dir) rmSync(this.dir, { recursive: true, force: true });
    this.dir = undefined;
  }

  /** Reads one request head, then tunnels (CONNECT) or forwards (absolute-form HTTP) it. */
  private serve(run: EgressRun, client: Socket): void {
    let head = Buffer.alloc(0);
    client.on('error', () => undefined);
    const onData = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) {
        if (head.length > MAX_HEAD) answer(client, 431, 'request head too large');
        return;
      }
      client.off('data', onData);
      client.pause();
      void this.request(run, client, head.subarray(0, end + 4), head.subarray(end + 4));
    };
    client.on('data', onData);
  }

  private async request(run: EgressRun, client: Socket, head: Buffer, rest: Buffer): Promise<void> {
    const lines = head.toString('latin1').split('\r\n');
    const [method, target, version] = lines[0]!.split(' ');
    let host: string;
    let port: number;
    let first: Buffer;
    if (method === 'CONNECT') {
      const m = /^(\[[^\]]+\]|[^:]+):(\d+)$/.exec(target ?? '');
      if (!m) return answer(client, 400, 'CONNECT needs host:port');
      [host, port] = [m[1]!.replace(/^\[|\]$/g, ''), Number(m[2])];
      first = rest;
    } else {
      let url: URL;
      try {
        url = new URL(target ?? '');
      } catch {
        return answer(client, 400, 'a proxy request needs an absolute http:// URL or CONNECT');
      }
      if (url.protocol !== 'http:')
        return answer(client, 400, 'only http:// is forwarded; use CONNECT for https');
      host = url.hostname.replace(/^\[|\]$/g, '');
      port = url.port ? Number(url.port) : 80;
      // Origin form, hop-by-hop proxy headers dropped, and one request per connection: a second
      // request on it could name another host.
      const headers = lines
        .slice(1)
        .filter((l) => l && !/^(proxy-[a-z-]*|connection|keep-alive)\s*:/i.test(l));
      first = Buffer.concat([
        Buffer.from(
          [`${method} ${url.pathname}${url.search} ${version}`, ...headers, 'Connection: close', '', ''].join(
            '\r\n',
          ),
          'latin1',
        ),
        rest,
      ]);
    }
    const entry: EgressEntry = {
      team: run.team,
      run: run.run,
      host,
      port,
      allowed: false,
      bytesOut: 0,
      bytesIn: 0,
    };
    const address = await this.resolve(run, host, port).catch((err: Error) => ({ refused: err.message }));
    if (typeof address !== 'string') {
      this.log({ ...entry, reason: address.refused });
      return answer(client, 403, `factoryd egress: ${host}:${port} refused: ${address.refused}`);
    }
    const upstream = createConnection({ host: address, port, timeout: CONNECT_TIMEOUT_MS });
    upstream.once('timeout', () => upstream.destroy(new Error('connect timed out')));
    upstream.once('error', (err) => {
      if (!entry.allowed) {
        this.log({ ...entry, address, reason: err.message });
        answer(client, 502, `factoryd egress: ${host}:${port}: ${err.message}`);
      }
    });
    upstream.once('connect', () => {
      upstream.setTimeout(0);
      Object.assign(entry, { allowed: true, address });
      if (method === 'CONNECT') client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (first.length) upstream.write(first);
      entry.bytesOut += first.length;
      client.on('data', (d: Buffer) => (entry.bytesOut += d.length));
      upstream.on('data', (d: Buffer) => (entry.bytesIn += d.length));
      client.pipe(upstream);
      upstream.pipe(client);
      client.resume();
      let logged = false;
      const end = () => {
        client.destroy();
        upstream.destroy();
        if (!logged) this.log(entry);
        logged = true;
      };
      client.once('close', end);
      upstream.once('close', end);
      if (client.destroyed) end(); // it left while the name was resolved
    });
  }

  /** The address to connect to, checked; throws with the reason it is refused. */
  private async resolve(run: EgressRun, host: string, port: number): Promise<string> {
    const decision = egressDecision(this.policy, host, port, run.allow);
    if (decision.verdict === 'refused') throw new Error(decision.reason);
    const addresses = isIP(host) ? [host] : (await lookup(host, { all: true })).map((a) => a.address);
    if (!addresses.length) throw new Error('the name resolves to no address');
    if (decision.verdict === 'checked') {
      const own = machineAddresses();
      for (const a of addresses) {
        const why =
          refusedAddress(a) ?? (own.has(plainAddress(a)) ? `${a} is an address of this machine` : undefined);
        if (why) throw new Error(why);
      }
    }
    return addresses[0]!;
  }
}

/**
 * This machine's own addresses, read at each check (interfaces come and go): a public one is not
 * refused as private, yet whatever listens on all addresses (the service, PostgreSQL with
 * `listen_addresses = '*'`) answers there. A harness must not reach them through a name that
 * resolves to one, or a rule that lists one.
 */
function machineAddresses(): Set<string> {
  return new Set(
    Object.values(networkInterfaces())
      .flat()
      .flatMap((i) => (i ? [plainAddress(i.address)] : [])),
  );
}

/** An address as compared: lower case, no zone, an IPv4-mapped IPv6 address as its IPv4 address. */
function plainAddress(address: string): string {
  return address
    .toLowerCase()
    .replace(/%.*$/, '')
    .replace(/^::ffff:(\d+\.\d+\.\d+\.\d+)$/, '$1');
}

function answer(client: Socket, status: number, message: string): void {
  const reason = {
    400: 'Bad Request',
    403: 'Forbidden',
    431: 'Request Header Fields Too Large',
    502: 'Bad Gateway',
  }[status];
  const body = `${message}\n`;
  client.end(
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: text/plain\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

/**
 * The forwarder's interpreter, found once: perl (perl-base, part of every Debian and Ubuntu system),
 * which starts a run's forwarder in a few milliseconds where Node took about 60 ms of CPU, on every
 * run (docs/security.md, "Measured"). Undefined where there is none: harnesses then get no way out.
 */
export const forwarderInterpreter: () => string | undefined = (() => {
  let found: string | undefined | null = null;
  return () => {
    if (found === null)
      found = ['/usr/bin/perl', '/bin/perl', '/usr/local/bin/perl'].find((p) => existsSync(p));
    return found;
  };
})();

/** The forwarder, from a copy the harness's uid reaches when the checkout keeps it out (shared-runtime.ts). */
function forwarderPath(): string {
  return reachableCopy(fromRoot('bin', 'egress-forwarder.pl'), 'egress-forwarder');
}

/** The port the forwarder listens on inside the sandbox (its own loopback): the proxy's. */
const EGRESS_PROXY_PORT = 3128;

/**
 * The program and arguments that run `command…` (argv) under the forwarder, inside the sandbox: the
 * proxy on 127.0.0.1:EGRESS_PROXY_PORT, and each trusted loopback destination (a model stub, a
 * local gateway) on its own port there, tunnelled to the same host and port outside. So a client
 * that ignores proxy variables for loopback still reaches the operator's provider, and only it.
 */
export function forwarderCommand(policy: EgressPolicy, socketInside = EGRESS_SOCKET_INSIDE): string[] {
  const loopback = policy.trusted.filter(
    (t) =>
      (t.host === 'localhost' || t.host === '::1' || /^127\./.test(t.host)) && t.port !== EGRESS_PROXY_PORT,
  );
  const ports = new Set<number>();
  const maps = loopback
    .filter((t) => !ports.has(t.port) && ports.add(t.port))
    .map((t) => `${t.port}=${t.host.includes(':') ? `[${t.host}]` : t.host}:${t.port}`);
  const perl = forwarderInterpreter();
  if (!perl) throw new Error('the egress forwarder needs perl, and there is none on this machine');
  return [perl, forwarderPath(), socketInside, String(EGRESS_PROXY_PORT), ...maps, '--'];
}

/** The variables that point a harness's HTTP clients at the proxy (both spellings: curl reads the lower-case ones). */
export function egressEnvironment(): Record<string, string> {
  const proxy = `http://127.0.0.1:${EGRESS_PROXY_PORT}`;
  const direct = 'localhost,127.0.0.1,::1'; // the forwarder's own ports: trusted loopback destinations
  return {
    HTTPS_PROXY: proxy,
    HTTP_PROXY: proxy,
    https_proxy: proxy,
    http_proxy: proxy,
    NO_PROXY: direct,
    no_proxy: direct,
    // Node 24+ makes fetch() honour the variables with this; Node 20's fetch ignores them.
    NODE_USE_ENV_PROXY: '1',
  };
}

/** One log line of a connection: who, where, the verdict and the bytes; nothing of what was sent. */
export function describeEgress(e: EgressEntry): string {
  const where = `${e.host.includes(':') ? `[${e.host}]` : e.host}:${e.port}`;
  return e.allowed
    ? `egress allowed: team ${e.team} run ${e.run} → ${where} (${e.address}), ${e.bytesOut} bytes out, ${e.bytesIn} in`
    : `egress refused: team ${e.team} run ${e.run} → ${where}: ${e.reason}`;
}
