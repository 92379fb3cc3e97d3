import { createServer, type Server } from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { MAX_UNSENT_BYTES, SseStream } from '../src/notifications/sse-stream.js';
import { eventually } from './support/eventually.js';

/** An SSE response on a real loopback connection whose client never reads. */
describe('a live stream whose client reads too slowly', () => {
  let server: Server;
  let client: Socket;
  afterEach(async () => {
    client?.destroy();
    await new Promise((resolve) => server?.close(resolve));
  });

  it('is dropped instead of buffering without bound', async () => {
    let stream: SseStream | undefined;
    let res: import('node:http').ServerResponse | undefined;
    server = createServer((_req, r) => {
      res = r;
      stream = new SseStream(r, 60_000);
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
        open.send('run.state', String(++n), JSON.stringify({ chunk }));
        most = Math.max(most, res!.writableLength);
      }
      return !open.open;
    }, 'the slow client to be dropped');
    expect(res!.destroyed).toBe(true);
    // At most one event past the cap was ever held.
    expect(most).toBeLessThan(MAX_UNSENT_BYTES + 2 * chunk.length);
  });
});
