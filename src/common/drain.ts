import type { IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';

/** How much of a refused request's remaining body is read and discarded before answering. */
const DRAIN_BYTES = 1024 * 1024;
const DRAIN_MS = 1000;

/**
 * Reads and discards the rest of a request; false when more than `cap` bytes remain, the rest takes
 * longer than DRAIN_MS, or the request broke off.
 */
export function drain(stream: Readable, cap = DRAIN_BYTES): Promise<boolean> {
  return new Promise((resolve) => {
    let seen = 0;
    const timer = setTimeout(() => finish(false), DRAIN_MS);
    const finish = (ok: boolean) => {
      clearTimeout(timer);
      stream.off('data', onData);
      stream.off('end', onEnd);
      stream.off('close', onClose);
      resolve(ok);
    };
    const onData = (chunk: Buffer) => {
      seen += chunk.length;
      if (seen > cap) finish(false);
    };
    const onEnd = () => finish(true);
    const onClose = () => finish(false);
    stream.on('data', onData);
    stream.on('end', onEnd);
    stream.on('close', onClose);
    stream.on('error', () => undefined);
    stream.resume();
  });
}

/**
 * For a request refused before its body was read: discard (never buffer) up to a small cap of what
 * is left, so the sender is reading when the answer comes instead of getting a reset; true when the
 * connection must close after the answer (more was left, it came too slowly, or it broke off).
 */
export async function mustCloseAfterRefusal(req: IncomingMessage): Promise<boolean> {
  if (req.complete || req.destroyed) return false;
  return !(await drain(req));
}
