import type { ServerResponse } from 'node:http';

/** What a stream may hold unsent for a slow client before it is dropped (it reconnects with Last-Event-ID). */
export const MAX_UNSENT_BYTES = 256 * 1024;

const CRLF = Buffer.from('\r\n');

/**
 * An event (or a comment) ready for the wire, built once however many streams send it: its bytes,
 * and the same bytes as one HTTP/1.1 chunk, which a chunked response writes to its socket as is.
 */
export class SseFrame {
  readonly chunk: Buffer;

  constructor(readonly bytes: Buffer) {
    this.chunk = Buffer.concat([Buffer.from(`${bytes.length.toString(16)}\r\n`), bytes, CRLF]);
  }

  /** An event; `json` is its data already serialised. */
  static event(event: string, id: string, json: string): SseFrame {
    return new SseFrame(Buffer.from(`id: ${id}\nevent: ${event}\ndata: ${json}\n\n`));
  }
}

const OPENED = ': stream open\n\n';
const HEARTBEAT = new SseFrame(Buffer.from(': heartbeat\n\n'));

/**
 * One Server-Sent Events response: events with ids, a heartbeat comment when its owner asks (one
 * timer for all streams, so that proxies keep idle connections open), and never an unbounded
 * buffer: a client that reads too slowly is cut off (and resumes from its last id).
 *
 * Once the head is out, a chunked response's events go to the socket as their frame's ready-made
 * chunk: one write of a shared buffer per event and stream, where the response's own write would
 * frame every chunk again and defer it to the next tick (the cost of 1,000 busy streams).
 */
export class SseStream {
  private ended = false;
  private readonly chunked: boolean;
  private readonly closers: Array<() => void> = [];

  constructor(
    private readonly res: ServerResponse,
    headers: Record<string, string> = {},
  ) {
    res.writeHead(200, {
      ...headers,
      'Content-Type': 'text/event-stream; charset=utf-8',
      'Cache-Control': 'no-cache, no-transform',
      // No Connection header of ours: Node keeps the connection alive unless the client asked it
      // closed (`Connection: close`, HTTP/1.0), which an explicit keep-alive would override.
      // nginx and its kin buffer responses unless told not to.
      'X-Accel-Buffering': 'no',
    });
    // Sends the head (and decides the framing: an HTTP/1.0 client gets no chunks).
    res.write(OPENED);
    this.chunked = res.chunkedEncoding;
    res.on('close', () => this.end());
  }

  get open(): boolean {
    return !this.ended;
  }

  /** Calls `fn` once, when the stream ends for whatever reason. */
  onEnd(fn: () => void): void {
    if (this.ended) fn();
    else this.closers.push(fn);
  }

  /** Events (a burst, a replay) in one write: the socket is corked while they go in. */
  send(frames: readonly SseFrame[]): void {
    const socket = this.chunked ? this.res.socket : null;
    // One event is one write already.
    const cork = socket && frames.length > 1 ? socket : null;
    cork?.cork();
    try {
      for (const frame of frames) {
        if (this.ended) return;
        // A response waiting for its socket (behind a pipelined one) buffers in the response itself.
        if (socket) socket.write(frame.chunk);
        else this.res.write(frame.bytes);
        // Counted with the socket's buffer; corked bytes count too: out with them to see what stays.
        if (this.res.writableLength > MAX_UNSENT_BYTES) {
          cork?.uncork();
          if (this.res.writableLength > MAX_UNSENT_BYTES) return this.drop();
          cork?.cork();
        }
      }
    } finally {
      cork?.uncork();
    }
  }

  heartbeat(): void {
    this.send([HEARTBEAT]);
  }

  /** A client that reads too slowly: cut off, it resumes from its last id. */
  private drop(): void {
    this.res.destroy();
    this.end();
  }

  end(): void {
    if (this.ended) return;
    this.ended = true;
    if (!this.res.writableEnded && !this.res.destroyed) this.res.end();
    for (const fn of this.closers.splice(0)) fn();
  }
}
