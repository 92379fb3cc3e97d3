/** How one item of a batch came out. */
export type Settled<R> = PromiseSettledResult<R>;

interface Waiting<T, R> {
  item: T;
  resolve(value: R): void;
  reject(reason: unknown): void;
}

export interface BatchLimits<T> {
  /** Batches running at once. */
  concurrency: number;
  maxItems: number;
  /** With `weigh`: a batch stops before the item that would take it past this (one item always goes). */
  maxWeight?: number;
  weigh?: (item: T) => number;
}

/**
 * Serves concurrent callers together: what is submitted while `concurrency` batches are in flight
 * waits and goes out as the next batch. Idle, a call goes out at once, so batching adds no delay;
 * under load one round trip serves many callers. `run` settles each item on its own (one item's
 * failure need not fail the others); if `run` itself throws, every item of the batch fails with it.
 */
export class Batcher<T, R> {
  private readonly waiting: Array<Waiting<T, R>> = [];
  private inFlight = 0;

  constructor(
    private readonly run: (items: T[]) => Promise<Array<Settled<R>>>,
    private readonly limits: BatchLimits<T>,
  ) {}

  submit(item: T): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.waiting.push({ item, resolve, reject });
      this.next();
    });
  }

  private next(): void {
    while (this.inFlight < this.limits.concurrency && this.waiting.length > 0) {
      const batch = this.waiting.splice(0, this.batchSize());
      this.inFlight++;
      this.run(batch.map((w) => w.item))
        .then(
          (results) =>
            batch.forEach((w, i) => {
              const r = results[i];
              if (r?.status === 'fulfilled') w.resolve(r.value);
              else w.reject(r ? r.reason : new Error('the batch returned no result for this item'));
            }),
          (err: unknown) => batch.forEach((w) => w.reject(err)),
        )
        .finally(() => {
          this.inFlight--;
          this.next();
        });
    }
  }

  private batchSize(): number {
    const { maxItems, maxWeight, weigh } = this.limits;
    if (!weigh || maxWeight === undefined) return maxItems;
    let n = 0;
    for (let weight = 0; n < Math.min(maxItems, this.waiting.length); n++) {
      weight += weigh(this.waiting[n]!.item);
      if (weight > maxWeight && n > 0) break;
    }
    return n;
  }
}
