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
