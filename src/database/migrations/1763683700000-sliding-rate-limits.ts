import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Sliding-window rate limits (docs/webhooks.md: "the rate limit is a sliding minute"), replacing
 * rate-limiter-flexible's fixed windows. A row holds one key's recent hits as parallel arrays, one
 * entry per step (second) that had hits: `at` = the newest hit's time in ms, `hits` = how many.
 * Still UNLOGGED (a WAL flush per take would serialise the ingress on fsync; after a database crash
 * the windows restart empty). `rate_limit_take` is the algorithm, one statement per call; the Redis
 * store (src/webhooks/rate-windows.ts) runs the same steps as a Lua script.
 */
export class SlidingRateLimits1763683700000 implements MigrationInterface {
  name = 'SlidingRateLimits1763683700000';

  async up(db: QueryRunner): Promise<void> {
    await db.query(`DROP TABLE IF EXISTS rate_limits`);
    await db.query(`
      CREATE UNLOGGED TABLE rate_limits (
        key         text PRIMARY KEY,
        at          bigint[] NOT NULL,
        hits        integer[] NOT NULL,
        -- When the newest entry leaves the window: the row is empty after that (retention deletes it).
        expires_at  bigint NOT NULL
      )`);
    // Grants up to p_wanted hits at p_now unless the hits younger than p_window_ms reach p_limit;
    // p_wanted = 0 only looks. retry_after_ms > 0 when the window is full after this call: the time
    // until its oldest entry leaves it, i.e. until a slot frees.
    await db.query(`
      CREATE FUNCTION rate_limit_take(p_key text, p_limit integer, p_wanted integer, p_now bigint,
                                      p_window_ms bigint, p_step_ms bigint)
      RETURNS TABLE (granted integer, retry_after_ms bigint) LANGUAGE plpgsql AS $$
      DECLARE
        v_at bigint[];
        v_hits integer[];
        v_count integer;
        v_last integer;
      BEGIN
        IF p_wanted > 0 THEN
          INSERT INTO rate_limits (key, at, hits, expires_at) VALUES (p_key, '{}', '{}', 0)
            ON CONFLICT (key) DO NOTHING;
          SELECT r.at, r.hits INTO v_at, v_hits FROM rate_limits r WHERE r.key = p_key FOR UPDATE;
        ELSE
          SELECT r.at, r.hits INTO v_at, v_hits FROM rate_limits r WHERE r.key = p_key;
        END IF;
        -- Only hits younger than the window count.
        SELECT coalesce(array_agg(e.a ORDER BY e.i), '{}'), coalesce(array_agg(e.h ORDER BY e.i), '{}'),
               coalesce(sum(e.h), 0)
          INTO v_at, v_hits, v_count
          FROM unnest(coalesce(v_at, '{}'), coalesce(v_hits, '{}')) WITH ORDINALITY AS e(a, h, i)
         WHERE e.a > p_now - p_window_ms;
        granted := least(p_wanted, greatest(0, p_limit - v_count));
        IF granted > 0 THEN
          v_last := cardinality(v_at);
          -- Hits in the same step share an entry stamped with the newest of them (so an entry never
          -- leaves the window before its hits are a full window old). A clock behind the newest
          -- entry (another replica's) also joins it, which keeps the entries in time order.
          IF v_last > 0 AND v_at[v_last] / p_step_ms >= p_now / p_step_ms THEN
            v_hits[v_last] := v_hits[v_last] + granted;
            v_at[v_last] := greatest(v_at[v_last], p_now);
          ELSE
            v_at := v_at || p_now;
            v_hits := v_hits || granted;
          END IF;
          UPDATE rate_limits r SET at = v_at, hits = v_hits, expires_at = v_at[cardinality(v_at)] + p_window_ms
           WHERE r.key = p_key;
        END IF;
        retry_after_ms := CASE WHEN v_count + granted >= p_limit AND cardinality(v_at) > 0
                               THEN v_at[1] + p_window_ms - p_now ELSE 0 END;
        RETURN NEXT;
      END $$`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(`DROP FUNCTION IF EXISTS rate_limit_take(text, integer, integer, bigint, bigint, bigint)`);
    await db.query(`DROP TABLE IF EXISTS rate_limits`);
    await db.query(`
      CREATE UNLOGGED TABLE rate_limits (
        key     varchar(255) PRIMARY KEY,
        points  integer NOT NULL DEFAULT 0,
        expire  bigint
      )`);
  }
}
