import { connect, type Socket } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { eventually } from '../support/eventually.js';
import { startTestService, type TestService } from '../support/service.js';

/**
 * Connections a client holds open while the service stops: one that never sent a byte, an idle
 * keep-alive one, and one whose request was in flight when the stop began. `server.close()` stops
 * Node's timeout checks, so none of them would ever be cut: the stop waited on the client (CI once
 * waited 70 s on three connections a client had opened and never used).
 */
interface Held {
  socket: Socket;
  closed(): boolean;
  received(): string;
}

function hold(port: number, ...parts: string[]): Promise<Held> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port });
    const chunks: Buffer[] = [];
    let closed = false;
    socket.on('data', (c) => chunks.push(c));
    socket.on('close', () => (closed = true));
    socket.on('error', reject);
    socket.on('connect', () => {
      for (const p of parts) socket.write(p);
      resolve({ socket, closed: () => closed, received: () => Buffer.concat(chunks).toString('latin1') });
    });
  });
}

const services: TestService[] = [];
afterAll(async () => {
  for (const s of services) await s.stop();
});
const start = async (env: Record<string, string>) => {
  const t = await startTestService(env);
  services.push(t);
  return { t, port: Number(new URL(t.url).port) };
};

describe('connections a client holds during a stop', () => {
  it('a stop closes silent and idle connections, and answers a request in flight whole before closing it', async () => {
    // Long timeouts: here only the stop can close a connection.
    const { t, port } = await start({ HTTP_REQUEST_TIMEOUT_MS: '60000', HTTP_HEADERS_TIMEOUT_MS: '60000' });
    const body = JSON.stringify({ prompt: 'Sent while the service stops' });
    const silent = await hold(port);
    const idle = await hold(port, 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
    await eventually(() => idle.received().includes('\r\n\r\n'), 'the idle connection’s first answer');
    // The head and half the body now: the request is in flight when the stop begins (the server's
    // 100 Continue says it has the head).
    const inFlight = await hold(
      port,
      [
        'POST /api/v1/agent/runs HTTP/1.1',
        'Host: 127.0.0.1',
        'Content-Type: application/json',
        `Authorization: Bearer ${t.adminKey}`,
        `Content-Length: ${Buffer.byteLength(body)}`,
        'Expect: 100-continue',
        '',
        '',
      ].join('\r\n'),
      body.slice(0, 10),
    );
    await eventually(
      () => inFlight.received().startsWith('HTTP/1.1 100 Continue'),
      'the server to take the head',
    );
    const stopped = t.service.stop();
    await eventually(
      () => silent.closed() && idle.closed(),
      'the stop to close the silent and the idle connection',
    );
    expect(inFlight.closed()).toBe(false);
    inFlight.socket.write(body.slice(10));
    await stopped;
    expect(inFlight.closed()).toBe(true);
    const answer = inFlight.received();
    expect(answer).toMatch(/\r\n\r\nHTTP\/1\.1 200 /);
    const runId = JSON.parse(answer.slice(answer.lastIndexOf('\r\n\r\n') + 4)).run_id;
    // Nothing lost: the run it was told of is there after a restart.
    await t.restart();
    const run = await t.call('GET', `/api/v1/agent/runs/${runId}`);
    expect(run.status).toBe(200);
    expect(run.body.prompt).toBe('Sent while the service stops');
  });
});
