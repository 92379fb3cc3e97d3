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
  /** Take nothing while this other window is full (looked at, never counted): a spent failed-auth budget. */
  unless?: { key: string; limit: number };
}

export interface Taken {
  granted: number;
  /** When the window is full after this take: ms until its oldest entry leaves it (a slot frees); else 0. */
  retryAfterMs: number;
  /** The `unless` window was full, so nothing was taken; `retryAfterMs` is that window's. */
  blocked: boolean;
}

/**
 * Shared sliding windows: every replica that uses the same store sees the same counts. Each take is
 * atomic per key; one call answers many takes in one round trip.
 */
export interface RateWindows {
  take(takes: Take[], now: number): Promise<Taken[]>;
  close(): Promise<void>;
}

/** In PostgreSQL: the UNLOGGED table `rate_limits` and its function `rate_limit_take` (migration 1763683700000). */
export class PostgresRateWindows implements RateWindows {
  constructor(private readonly db: Database) {}

  async take(takes: Take[], now: number): Promise<Taken[]> {
    // Keys in a fixed order: two replicas' statements then lock rows in the same order (no deadlock;
    // `unless` windows are only looked at, never locked).
    const order = takes.map((_, i) => i).sort((a, b) => (takes[a]!.key < takes[b]!.key ? -1 : 1));
    const sorted = order.map((i) => takes[i]!);
    const rows = await this.db.query<{ blocked_ms: string; granted: number; retry_after_ms: string }>(
      `SELECT u.retry_after_ms AS blocked_ms, t.granted, t.retry_after_ms
         FROM unnest($1::text[], $2::int[], $3::int[], $4::text[], $5::int[])
                WITH ORDINALITY AS q(key, lim, wanted, unless_key, unless_lim, n),
              LATERAL rate_limit_take(q.unless_key, q.unless_lim, 0, $6, $7, $8) u,
              LATERAL rate_limit_take(q.key, q.lim, CASE WHEN u.retry_after_ms > 0 THEN 0 ELSE q.wanted END,
                                      $6, $7, $8) t
        ORDER BY q.n`,
      [
        sorted.map((t) => t.key),
        sorted.map((t) => t.limit),
        sorted.map((t) => t.wanted),
        sorted.map((t) => t.unless?.key ?? null),
        sorted.map((t) => t.unless?.limit ?? 0),
        now,
        WINDOW_MS,
        STEP_MS,
      ],
    );
    const taken: Taken[] = new Array(takes.length);
    order.forEach((i, n) => {
      const row = rows[n]!;
      const blockedMs = Number(row.blocked_ms);
      taken[i] =
        blockedMs > 0
          ? { granted: 0, retryAfterMs: blockedMs, blocked: true }
          : { granted: row.granted, retryAfterMs: Number(row.retry_after_ms), blocked: false };
    });
    return taken;
  }

  async close(): Promise<void> {}
}

/**
 * rate_limit_take (see the migration) as a Redis script, step for step, and the same `unless`: KEYS[2]
 * (when ARGV[6] > 0) is looked at first. A window is one string, `at:hits,at:hits,…` in time order,
 * expiring when its newest entry leaves the window.
 */
const TAKE_SCRIPT = `
local now, window, step = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local function take(key, limit, wanted)
  local at, hits, count = {}, {}, 0
  local stored = redis.call('GET', key)
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
    redis.call('SET', key, table.concat(parts, ','), 'PX', at[#at] + window - now)
  end
  local retry = 0
  if count + granted >= limit and #at > 0 then retry = at[1] + window - now end
  return granted, retry
end
local unlessLimit = tonumber(ARGV[6])
if unlessLimit > 0 then
  local _, blocked = take(KEYS[2], unlessLimit, 0)
  if blocked > 0 then return {0, blocked, 1} end
end
local granted, retry = take(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]))
return {granted, retry, 0}
`;

type WithTake = { rateLimitTake(key: string, unlessKey: string, ...args: number[]): unknown };

/**
 * In Redis (REDIS_URL; a single server, not Cluster: a take with `unless` touches two keys): one key
 * per window under `factoryd:rate:`, taken by TAKE_SCRIPT.
 */
export class RedisRateWindows implements RateWindows {
  constructor(private readonly redis: Redis) {
    redis.defineCommand('rateLimitTake', { numberOfKeys: 2, lua: TAKE_SCRIPT });
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
        `factoryd:rate:${t.unless?.key ?? t.key}`,
        t.limit,
        t.wanted,
        now,
        WINDOW_MS,
        STEP_MS,
        t.unless?.limit ?? 0,
      );
    }
    const results = (await pipeline.exec()) ?? [];
    return takes.map((_, i) => {
      const [err, reply] = results[i] ?? [new Error('Redis returned no reply')];
      if (err) throw err;
      const [granted, retryAfterMs, blocked] = reply as [number, number, number];
      return { granted, retryAfterMs, blocked: blocked === 1 };
    });
  }

  async close(): Promise<void> {
    await this.redis.quit().catch(() => undefined);
  }
}
