/**
 * The one way factoryd tries something again: growing pauses (`Backoff`), and `retry` for work that is
 * awaited. A reconnect driven by a timer (the LISTEN connection, the embedded server's supervisor)
 * takes its pauses from a `Backoff` too.
 */

/** Pauses that start at `firstMs` and double up to `maxMs` (equal: a fixed pause). */
export class Backoff {
  private nextMs: number;

  constructor(private readonly pauses: { firstMs: number; maxMs: number }) {
    this.nextMs = pauses.firstMs;
  }

  /** The pause before the next try; the one after it is longer, up to `maxMs`. */
  next(): number {
    const pause = this.nextMs;
    this.nextMs = Math.min(this.nextMs * 2, this.pauses.maxMs);
    return pause;
  }

  /** Back to `firstMs`: the thing worked again. */
  reset(): void {
    this.nextMs = this.pauses.firstMs;
  }
}

export interface RetryOptions {
  /** The pauses between tries. */
  pauses: { firstMs: number; maxMs: number };
  /** Whether to try again after `err`, the failure of try number `attempt` (0 the first); false throws it. */
  again(err: unknown, attempt: number): boolean;
  /** Told before each pause (e.g. to say what is awaited). */
  onRetry?(err: unknown, pauseMs: number): void;
}

/** Runs `work` until it succeeds, or until `again` says a failure is final (that failure is thrown). */
export async function retry<T>(work: () => Promise<T>, opts: RetryOptions): Promise<T> {
  const backoff = new Backoff(opts.pauses);
  for (let attempt = 0; ; attempt++) {
    try {
      return await work();
    } catch (err) {
      if (!opts.again(err, attempt)) throw err;
      const pause = backoff.next();
      opts.onRetry?.(err, pause);
      await new Promise((resolve) => setTimeout(resolve, pause));
    }
  }
}
