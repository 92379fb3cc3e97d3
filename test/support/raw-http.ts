import { connect } from 'node:net';

/** What came back on a raw connection: the first response's status and text (undefined if none). */
export interface RawResponse {
  status?: number;
  text: string;
}

/**
 * Writes raw bytes to host:port (any framing, lies included), optionally half-closes, and collects
 * whatever the server answers until it closes or `timeoutMs` passes.
 */
export function rawRequest(
  port: number,
  parts: (string | Buffer)[],
  opts: { halfClose?: boolean; timeoutMs?: number } = {},
): Promise<RawResponse> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    const chunks: Buffer[] = [];
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      const text = Buffer.concat(chunks).toString('latin1');
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(text);
      resolve({ status: m ? Number(m[1]) : undefined, text });
    };
    const timer = setTimeout(finish, opts.timeoutMs ?? 3000);
    socket.on('data', (c) => chunks.push(c));
    socket.on('error', finish);
    socket.on('close', finish);
    socket.on('connect', () => {
      for (const p of parts) socket.write(p);
      if (opts.halfClose) socket.end();
    });
  });
}

/** A client that sends its request head, then its body one byte at a time, until the server answers or closes. */
export interface Trickle {
  /** Bytes of body sent so far. */
  sent(): number;
  /** The server's answer so far (undefined status until one came). */
  response(): RawResponse;
  /** True once the server closed the connection. */
  closed(): boolean;
  stop(): void;
}

export function trickle(port: number, head: string, opts: { everyMs?: number } = {}): Trickle {
  const socket = connect({ host: '127.0.0.1', port });
  const chunks: Buffer[] = [];
  let sent = 0;
  let closed = false;
  let timer: NodeJS.Timeout | undefined;
  const stop = () => {
    clearInterval(timer);
    socket.destroy();
  };
  socket.on('data', (c) => chunks.push(c));
  socket.on('error', () => undefined);
  socket.on('close', () => {
    closed = true;
    clearInterval(timer);
  });
  socket.on('connect', () => {
    socket.write(head);
    timer = setInterval(() => {
      if (socket.writable) socket.write('x', () => sent++);
    }, opts.everyMs ?? 100);
  });
  return {
    sent: () => sent,
    response: () => {
      const text = Buffer.concat(chunks).toString('latin1');
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(text);
      return { status: m ? Number(m[1]) : undefined, text };
    },
    closed: () => closed,
    stop,
  };
}
