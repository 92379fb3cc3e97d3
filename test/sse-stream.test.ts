import { createServer, type Server } from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { MAX_UNSENT_BYTES, SseFrame, SseStream } from '../src/notifications/sse-stream.js';
import { eventually } from './support/eventually.js';

/** An SSE response on a real loopback connection whose client never reads. */
describe('a live stream whose client reads too slowly', () => {
  let server: Server;
  let client: Socket;
  afterEach(async () => {
    client?.destroy();
    await new Promise((resolve) => server?.close(resolve));
  });

  // One event per write, and bursts (a replay page) written at once with the socket corked.
  it.each([1, 64])(
    'is dropped instead of buffering without bound (%i events per write)',
    async (perWrite) => {
      let stream: SseStream | undefined;
      let res: import('node:http').ServerResponse | undefined;
      server = createServer((_req, r) => {
        res = r;
        stream = new SseStream(r);
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const port = (server.address() as { port: number }).port;
      client = connect(port, '127.0.0.1', () => client.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n'));
      client.pause(); // never reads: the kernel's buffers fill, then the response's
      const open = await eventually(() => stream, 'the stream to open');
      const chunk = 'x'.repeat(16 * 1024);
      let most = 0;
      let n = 0;
      await eventually(() => {
        for (let i = 0; i < 64 && open.open; i++) {
          const burst = Array.from({ length: perWrite }, () =>
            SseFrame.event('run.state', String(++n), JSON.stringify({ chunk })),
          );
          open.send(burst);
          most = Math.max(most, res!.writableLength);
        }
        return !open.open;
      }, 'the slow client to be dropped');
      expect(res!.destroyed).toBe(true);
      // At most one event past the cap was ever held.
      expect(most).toBeLessThan(MAX_UNSENT_BYTES + 2 * chunk.length);
    },
  );
});

/** The bytes an SSE response puts on a raw loopback connection, for a client speaking `version`. */
async function rawResponse(version: string, write: (stream: SseStream) => void): Promise<string> {
  const server = createServer((_req, res) => {
    const stream = new SseStream(res);
    write(stream);
    stream.end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const port = (server.address() as { port: number }).port;
    const client = connect(port, '127.0.0.1', () => client.write(`GET / ${version}\r\nHost: x\r\n\r\n`));
    let bytes = '';
    // Until the server closes (HTTP/1.0) or the last chunk is in (HTTP/1.1 keeps the connection).
    await new Promise((resolve) => {
      client.on('data', (d) => {
        bytes += d.toString('latin1');
        if (bytes.endsWith('\r\n0\r\n\r\n')) client.destroy();
      });
      client.on('close', resolve);
    });
    return bytes.slice(bytes.indexOf('\r\n\r\n') + 4);
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
}

describe('a live stream’s framing', () => {
  const events = [SseFrame.event('run.state', '1', '{"a":1}'), SseFrame.event('run.state', '2', '{"b":"é"}')];

  it('sends HTTP/1.1 chunks, one per event, written as framed once for every stream', async () => {
    const body = await rawResponse('HTTP/1.1', (s) => {
      s.send(events);
      s.heartbeat();
    });
    const chunk = (text: string) => `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`;
    expect(body).toBe(
      chunk(': stream open\n\n') +
        chunk('id: 1\nevent: run.state\ndata: {"a":1}\n\n') +
        Buffer.from(chunk('id: 2\nevent: run.state\ndata: {"b":"é"}\n\n')).toString('latin1') +
        chunk(': heartbeat\n\n') +
        '0\r\n\r\n',
    );
  });

  it('sends plain events to an HTTP/1.0 client, which gets no chunks', async () => {
    const body = await rawResponse('HTTP/1.0', (s) => s.send(events));
    expect(Buffer.from(body, 'latin1').toString()).toBe(
      ': stream open\n\nid: 1\nevent: run.state\ndata: {"a":1}\n\nid: 2\nevent: run.state\ndata: {"b":"é"}\n\n',
    );
  });

  it('closes the connection after the stream when the client asked so (Connection: close)', async () => {
    const server = createServer((_req, res) => new SseStream(res).end());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const port = (server.address() as { port: number }).port;
      const client = connect(port, '127.0.0.1', () =>
        client.write('GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'),
      );
      let bytes = '';
      client.on('data', (d) => (bytes += d.toString('latin1')));
      // The server ends the connection itself: the client never destroys it.
      await new Promise((resolve) => client.on('close', resolve));
      const head = bytes.slice(0, bytes.indexOf('\r\n\r\n')).toLowerCase();
      expect(head).toContain('connection: close');
      expect(head).not.toContain('keep-alive');
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
