import type { ServerResponse } from 'node:http';

/** What a stream may hold unsent for a slow client before it is dropped (it reconnects with Last-Event-ID). */
export const MAX_UNSENT_BYTES = 256 * 1024;

/**
 * One Server-Sent Events response: events with ids, a comment line every `heartbeatMs` so that
 * proxies keep the connection open, and never an unbounded buffer: a client that reads too slowly
 * is cut off (and resumes from its last id).
 */
export class SseStream {
  private heartbeat: NodeJS.Timeout;
  private ended = false;
  private readonly closers: Array<() => void> = [];

  constructor(
    private readonly res: ServerResponse,
    heartbeatMs: number,
    headers: Record<string, string> = {},
  ) {
    res.writeHead(200, {
      ...headers,
      'Content-Type': 'text/event-stream; charset=utf-8',
      'Cache-Control': 'no-cache, no-transform',
      Connection: 'keep-alive',
      // nginx and its kin buffer responses unless told not to.
      'X-Accel-Buffering': 'no',
    });
    res.write(': stream open\n\n');
    this.heartbeat = setInterval(() => this.write(': heartbeat\n\n'), heartbeatMs);
    this.heartbeat.unref();
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

  /** An event; `json` is its data already serialised (one event goes to many streams: serialised once). */
  send(event: string, id: string, json: string): void {
    this.write(`id: ${id}\nevent: ${event}\ndata: ${json}\n\n`);
  }

  end(): void {
    if (this.ended) return;
    this.ended = true;
    clearInterval(this.heartbeat);
    if (!this.res.writableEnded && !this.res.destroyed) this.res.end();
    for (const fn of this.closers.splice(0)) fn();
  }

  private write(chunk: string): void {
    if (this.ended) return;
    if (!this.res.write(chunk) && this.res.writableLength > MAX_UNSENT_BYTES) {
      this.res.destroy();
      this.end();
    }
  }
}
