import type { Redis } from 'ioredis';
import type { Database } from '../database/database.js';

/** The sliding window: a hit counts for 60 s. */
export const WINDOW_MS = 60_000;
/** Hits within one second share an entry (stamped with the newest), so a window holds ≤ 61 entries. */
export const STEP_MS = 1_000;

/** Take up to `wanted` hits (0: only look) from the window `key`, which allows `limit` per WINDOW_MS. */
export interface Take {
  key: string;
  limit: number;
  wanted: number;
}

export interface Taken {
  granted: number;
  /** When the window is full after this take: ms until its oldest entry leaves it (a slot frees); else 0. */
  retryAfterMs: number;
}

/**
 * Shared sliding windows: every replica that uses the same store sees the same counts. Each take is
 * atomic per key; one call answers many keys in one round trip.
 */
export interface RateWindows {
  take(takes: Take[], now: number): Promise<Taken[]>;
  close(): Promise<void>;
}

/** In PostgreSQL: the UNLOGGED table `rate_limits` and its function `rate_limit_take` (migration 1763683700000). */
export class PostgresRateWindows implements RateWindows {
  constructor(private readonly db: Database) {}

  async take(takes: Take[], now: number): Promise<Taken[]> {
    // Keys in a fixed order: two replicas' statements then lock rows in the same order (no deadlock).
    const order = takes.map((_, i) => i).sort((a, b) => (takes[a]!.key < takes[b]!.key ? -1 : 1));
    const sorted = order.map((i) => takes[i]!);
    const rows = await this.db.query<{ granted: number; retry_after_ms: string }>(
      `SELECT t.granted, t.retry_after_ms
         FROM unnest($1::text[], $2::int[], $3::int[]) WITH ORDINALITY AS q(key, lim, wanted, n),
              LATERAL rate_limit_take(q.key, q.lim, q.wanted, $4, $5, $6) t
        ORDER BY q.n`,
      [
        sorted.map((t) => t.key),
        sorted.map((t) => t.limit),
        sorted.map((t) => t.wanted),
        now,
        WINDOW_MS,
        STEP_MS,
      ],
    );
    const taken: Taken[] = new Array(takes.length);
    order.forEach((i, n) => {
      taken[i] = { granted: rows[n]!.granted, retryAfterMs: Number(rows[n]!.retry_after_ms) };
    });
    return taken;
  }

  async close(): Promise<void> {}
}

/**
 * rate_limit_take (see the migration) as a Redis script, step for step. The window is one string,
 * `at:hits,at:hits,…` in time order, expiring when its newest entry leaves the window.
 */
const TAKE_SCRIPT = `
local limit, wanted, now = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local window, step = tonumber(ARGV[4]), tonumber(ARGV[5])
local at, hits, count = {}, {}, 0
local stored = redis.call('GET', KEYS[1])
if stored then
  for a, h in string.gmatch(stored, '(%d+):(%d+)') do
    a, h = tonumber(a), tonumber(h)
    if a > now - window then
      at[#at + 1], hits[#hits + 1], count = a, h, count + h
    end
  end
end
local granted = math.min(wanted, math.max(0, limit - count))
if granted > 0 then
  local last = #at
  if last > 0 and math.floor(at[last] / step) >= math.floor(now / step) then
    hits[last], at[last] = hits[last] + granted, math.max(at[last], now)
  else
    at[last + 1], hits[last + 1] = now, granted
  end
  local parts = {}
  for i = 1, #at do parts[i] = string.format('%d:%d', at[i], hits[i]) end
  redis.call('SET', KEYS[1], table.concat(parts, ','), 'PX', at[#at] + window - now)
end
local retry = 0
if count + granted >= limit and #at > 0 then retry = at[1] + window - now end
return {granted, retry}
`;

type WithTake = { rateLimitTake(key: string, ...args: number[]): unknown };

/** In Redis (REDIS_URL): one key per window under `factoryd:rate:`, taken by TAKE_SCRIPT. */
export class RedisRateWindows implements RateWindows {
  constructor(private readonly redis: Redis) {
    redis.defineCommand('rateLimitTake', { numberOfKeys: 1, lua: TAKE_SCRIPT });
  }

  /** Connects to `url`; fails (rather than queueing forever) when Redis cannot be reached. */
  static async connect(url: string): Promise<RedisRateWindows> {
    const { Redis } = await import('ioredis');
    const redis = new Redis(url, { maxRetriesPerRequest: 2, lazyConnect: true });
    redis.on('error', () => undefined); // each failed command reports its own error
    try {
      await redis.connect();
    } catch (err) {
      redis.disconnect();
      throw new Error(`REDIS_URL: cannot connect to Redis (${(err as Error).message})`, { cause: err });
    }
    return new RedisRateWindows(redis);
  }

  async take(takes: Take[], now: number): Promise<Taken[]> {
    const pipeline = this.redis.pipeline();
    for (const t of takes) {
      (pipeline as unknown as WithTake).rateLimitTake(
        `factoryd:rate:${t.key}`,
        t.limit,
        t.wanted,
        now,
        WINDOW_MS,
        STEP_MS,
      );
    }
    const results = (await pipeline.exec()) ?? [];
    return takes.map((_, i) => {
      const [err, reply] = results[i] ?? [new Error('Redis returned no reply')];
      if (err) throw err;
      const [granted, retryAfterMs] = reply as [number, number];
      return { granted, retryAfterMs };
    });
  }

  async close(): Promise<void> {
    await this.redis.quit().catch(() => undefined);
  }
}
