import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer as createHttpServer, type IncomingMessage, type Server as HttpServer } from 'node:http';
import { createServer, type Server } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fromRoot } from '../../src/common/paths.js';
import { packageProgramCommand } from '../../src/workers/launcher/harness-programs.js';
import { createTestDatabase } from '../support/database.js';
import { eventually } from '../support/eventually.js';
// @ts-expect-error plain JS shared with bench/
import { dockerUnavailable, localImage } from '../support/local-image.js';
import { request, startServeProcess, type ServeProcess } from '../support/serve-process.js';
import { bwrapMissing } from '../support/sandbox-check.js';

/**
 * A webhook's payload becomes an agent's prompt: whatever a harness reaches, a sender reaches. The
 * harness here (network-probe-harness.mjs) tries, as an attacker would, the machine's PostgreSQL (TCP
 * and its socket), the service's own port, another local server, cloud metadata, Docker's socket and
 * a public name, directly and through the egress proxy; then the operator's model stub, the one
 * thing it is meant to reach. Every mode this machine can run (docs/security.md, "A harness's network").
 */
const root = process.getuid?.() === 0;
const bwrapWorks = bwrapMissing() === undefined;
const dockerSkip: string | undefined = dockerUnavailable();
const modes = [
  { mode: 'bwrap', skip: !bwrapWorks && 'bwrap cannot make namespaces here' },
  { mode: 'user', skip: !root && 'user mode needs the service to run as root' },
  // The Docker backend: a container on the `none` network, of an image made from this machine's files.
  { mode: 'docker', skip: dockerSkip },
  { mode: 'none', skip: false },
] as const;

// Through the package's copy where the harness's uid can read it (a 0700 checkout as root).
const PROBE = packageProgramCommand('test/security', 'network-probe-harness.mjs');
const PG_SOCKET = ['/var/run/postgresql/.s.PGSQL.5432', '/tmp/.s.PGSQL.5432'].find((p) => existsSync(p));
const DOCKER_SOCKET = '/var/run/docker.sock';
/** An abstract Unix socket (Linux): no file to hide, only a network namespace keeps it out of reach. */
const ABSTRACT = `factoryd-net-probe-${process.pid}`;
/** This machine's own non-loopback IPv4 address (not a container bridge's), if it has one. */
const MACHINE_IP = Object.entries(networkInterfaces())
  .filter(([name]) => !/^(docker|br-|veth)/.test(name))
  .flatMap(([, list]) => list ?? [])
  .find((i) => i.family === 'IPv4' && !i.internal)?.address;

interface Reach {
  tcp: Record<string, string>;
  sockets: Record<string, string>;
  proxied: Record<string, string>;
  proxiedGet: Record<string, string>;
  stub: { direct?: string; proxy?: string };
}

/** `factoryd serve` on a database and DATA_DIR of its own (the first start prints the admin key). */
async function serve(
  env: Record<string, string>,
): Promise<{ served: ServeProcess; url: string; close(): Promise<void> }> {
  const db = await createTestDatabase();
  const dataDir = mkdtempSync(join(tmpdir(), 'factoryd-net-'));
  const served = await startServeProcess({
    DATABASE_URL: db.url,
    DATA_DIR: dataDir,
    WORKER_CONCURRENCY: '1',
    FACTORY_POLL_SECONDS: '3600',
    LOG_LEVEL: 'info',
    ...env,
  }).catch(async (err: unknown) => {
    await db.drop();
    throw err;
  });
  return {
    served,
    url: db.url,
    close: async () => {
      await served.stop();
      await db.drop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

describe('what a harness can reach of the network, per sandbox mode', () => {
  let other: Server;
  let abstract: Server;
  let stub: HttpServer;
  const stubRequests: IncomingMessage[] = [];
  const port = (s: Server | HttpServer) => (s.address() as { port: number }).port;

  beforeAll(async () => {
    // The probe may close before reading the greeting (a reset): that is its business, not an error here.
    const greet = (s: import('node:net').Socket) =>
      s.on('error', () => undefined).end('another local service\n');
    other = createServer(greet);
    abstract = createServer(greet);
    // The model provider's stub: the operator points the harnesses at it (ANTHROPIC_BASE_URL).
    stub = createHttpServer((req, res) => {
      stubRequests.push(req);
      req.resume();
      req.on('end', () => {
        res.setHeader('content-type', 'application/json');
        res.end(
          JSON.stringify({ type: 'message', role: 'assistant', content: [{ type: 'text', text: 'hi' }] }),
        );
      });
    });
    await Promise.all([
      // Every address of the machine, IPv4 and IPv6: loopback, [::1] and its own address.
      new Promise<void>((r) => other.listen(0, '::', r)),
      new Promise<void>((r) => abstract.listen(`\0${ABSTRACT}`, r)),
      new Promise<void>((r) => stub.listen(0, '127.0.0.1', r)),
    ]);
  });
  afterAll(async () => {
    other?.close();
    abstract?.close();
    stub?.close();
  });

  for (const { mode, skip } of modes) {
    it.skipIf(Boolean(skip))(`${mode}${skip ? ` (skipped: ${skip})` : ''}`, { timeout: 90_000 }, async () => {
      const stubUrl = `http://127.0.0.1:${port(stub)}`;
      const service = await serve({
        ...(mode === 'docker'
          ? {
              WORKER_BACKEND: 'docker',
              WORKER_DOCKER_IMAGE: localImage(),
              WORKER_DOCKER_MOUNTS: fromRoot('test', 'security'),
              WORKER_DOCKER_KEEP_FAILED_SECONDS: '0',
            }
          : { HARNESS_SANDBOX: mode }),
        HARNESS_COMMAND: PROBE,
        // Names and addresses the allow list admits, so that only the check after DNS stands between
        // the harness and the machine: a name resolving to loopback, a loopback literal, the machine's address.
        HARNESS_EGRESS_ALLOW: [
          `localhost:${port(other)}`,
          `127.0.0.1:${port(other)}`,
          ...(MACHINE_IP ? [`${MACHINE_IP}:${port(other)}`] : []),
        ].join(','),
        ANTHROPIC_BASE_URL: stubUrl,
        HARNESS_ENV_ALLOW: 'ANTHROPIC_BASE_URL',
      });
      const { served } = service;
      const dbAddress = new URL(service.url);
      try {
        const servicePort = new URL(served.url).port;
        const targets = {
          tcp: {
            postgres: `${dbAddress.hostname}:${dbAddress.port || 5432}`,
            service: `127.0.0.1:${servicePort}`,
            other: `127.0.0.1:${port(other)}`,
            other_v6: `[::1]:${port(other)}`,
            ...(MACHINE_IP && { machine: `${MACHINE_IP}:${port(other)}` }),
            metadata: '169.254.169.254:80',
          },
          sockets: {
            ...(PG_SOCKET && { postgres: PG_SOCKET }),
            ...(existsSync(DOCKER_SOCKET) && { docker: DOCKER_SOCKET }),
            abstract: `@${ABSTRACT}`,
          },
          proxied: {
            postgres: `127.0.0.1:${dbAddress.port || 5432}`,
            service: `127.0.0.1:${servicePort}`,
            other: `localhost:${port(other)}`,
            metadata: '169.254.169.254:80',
            metadata_v6: '[fd00:ec2::254]:80',
            private: '10.0.0.1:443',
            public: 'example.com:443',
            // Admitted by the allow list: refused only by the address check after DNS.
            allowed_name: `localhost:${port(other)}`,
            allowed_loopback: `127.0.0.1:${port(other)}`,
            ...(MACHINE_IP && { allowed_machine: `${MACHINE_IP}:${port(other)}` }),
          },
          proxiedGet: {
            allowed_loopback: `http://127.0.0.1:${port(other)}/`,
            allowed_name: `http://localhost:${port(other)}/`,
            service: `http://127.0.0.1:${servicePort}/api/v1/factory-files/schemas`,
          },
          stub: stubUrl,
        };
        const created = await request('create', `${served.url}/api/v1/agent/runs`, {
          method: 'POST',
          key: served.adminKey,
          body: { prompt: JSON.stringify(targets) },
        });
        expect(created.status).toBe(200);
        const run = await eventually(async () => {
          const r = await request('get', `${served.url}/api/v1/agent/runs/${created.body.run_id}`, {
            key: served.adminKey,
          });
          return ['SUCCEEDED', 'FAILED', 'ERROR'].includes(r.body?.state) && r.body;
        }, 'the probe run to end');
        expect(run.state, JSON.stringify(run.status_message)).toBe('SUCCEEDED');
        const found = JSON.parse(String(run.status_message.message).replace(/^REACH /, '')) as Reach;
        console.log(`${mode}: what the harness reached`, JSON.stringify(found, null, 2));
        const log = served.output();

        if (mode === 'none') {
          // The control: the probe does see what an unconfined harness reaches, and the start says so.
          expect(found.tcp.other).toBe('reached');
          expect(found.tcp.service).toBe('reached');
          expect(found.tcp.other_v6).toBe('reached');
          if (MACHINE_IP) expect(found.tcp.machine).toBe('reached');
          expect(found.sockets.abstract).toBe('reached');
          expect(found.stub.direct).toMatch(/^200 /);
          expect(log).toMatch(/harness network: NOT CONFINED \(sandbox none\)/);
          return;
        }

        // Nothing of the machine, directly…
        for (const [name, got] of Object.entries({ ...found.tcp, ...found.sockets }))
          expect(got, `${name} reached directly`).not.toBe('reached');
        // …nor through the proxy, whatever the name's form; a public host outside the allow list neither.
        for (const [name, got] of Object.entries({ ...found.proxied, ...found.proxiedGet }))
          expect(got, `${name} through the proxy`).toMatch(/^HTTP\/1\.1 (403|400)/);
        // What the allow list admitted, the address check refused, naming why; CONNECT and GET alike.
        const afterDns =
          /^HTTP\/1\.1 403 Forbidden — factoryd egress: .* refused: 127\.0\.0\.1 is a loopback, private/;
        expect(found.proxied.allowed_loopback).toMatch(afterDns);
        expect(found.proxiedGet.allowed_loopback).toMatch(afterDns);
        for (const got of [found.proxied.allowed_name, found.proxiedGet.allowed_name])
          expect(got).toMatch(
            /^HTTP\/1\.1 403 Forbidden — factoryd egress: localhost:\d+ refused: (127\.0\.0\.1|::1) is a loopback, private/,
          );
        if (MACHINE_IP)
          expect(found.proxied.allowed_machine).toMatch(
            /^HTTP\/1\.1 403 Forbidden — factoryd egress: .* refused: .* is (an address of this machine|a loopback, private)/,
          );
        expect(found.proxiedGet.service).toMatch(/not in the egress allow list/);
        // The operator's provider is reachable, both ways a client may go, and only through the proxy.
        expect(found.stub.direct).toMatch(/^200 /);
        expect(found.stub.proxy).toMatch(/^200 /);
        expect(stubRequests.length).toBeGreaterThanOrEqual(2);
        const team = /team (\S+) run/.exec(log)?.[1];
        expect(log).toMatch(
          new RegExp(
            `egress allowed: team ${team} run ${created.body.run_id} → 127\\.0\\.0\\.1:${port(stub)} \\(127\\.0\\.0\\.1\\), \\d+ bytes out, \\d+ in`,
          ),
        );
        expect(log).toMatch(
          new RegExp(`egress refused: team \\S+ run ${created.body.run_id} → 169\\.254\\.169\\.254:80`),
        );
        expect(log).toMatch(/egress refused: .* → example\.com:443: not in the egress allow list/);
        expect(log).toMatch(
          mode === 'docker'
            ? /harness network: each container on Docker's none network/
            : /harness network: a namespace of its own/,
        );
        stubRequests.length = 0;
      } finally {
        await service.close();
      }
    });
  }

  it.skipIf(
    Boolean(new URL(process.env.DATABASE_URL ?? 'postgres://x:y@h/d').password) || !process.env.DATABASE_URL,
  )(
    'the start says when DATABASE_URL is reachable without a password, and what the sandbox does about it',
    { timeout: 60_000 },
    async () => {
      // DATABASE_URL with no password that the test setup connected with: the server trusts this machine.
      const { served, close } = await serve({});
      try {
        const said = await eventually(
          () =>
            /DATABASE_URL: the server accepts user \S+ with no password through [^\n]*/.exec(
              served.output(),
            )?.[0],
          'the passwordless warning',
        );
        expect(said).toMatch(/harnesses cannot reach it \(sandbox (bwrap|user)|every harness can connect/);
      } finally {
        await close();
      }
    },
  );
});
