import { Inject, Injectable } from '@nestjs/common';
import { Database, type Queryable } from '../database/database.js';

/**
 * Models one run may have sums for: a harness that reports a new model id with every line would
 * otherwise grow the table (and every read of the run) without bound. Reports of further models are
 * dropped; the models already summed keep counting.
 */
export const MAX_MODELS_PER_RUN = 100;

/** Tokens one report of a harness says a model used (the harness protocol's `usage` event). */
export interface UsageReport {
  model_id: string;
  input_tokens: number;
  output_tokens: number;
  cache_read_tokens?: number;
  cache_write_tokens?: number;
}

/** A run's tokens for one model, summed over every report of every execution. */
export interface ModelUsage {
  modelId: string;
  inputTokens: number;
  outputTokens: number;
  /** null: no report of this model gave the count (unmeasured, not zero). */
  cacheReadTokens: number | null;
  cacheWriteTokens: number | null;
  reports: number;
  lastExecution: number;
  updatedAt: Date;
}

/**
 * `run_token_usage`, the one home of a run's token counts: workers add what their harnesses report,
 * the Run API reads the sums (`model_token_usage` on the run, `GET …/harness-usage`).
 */
@Injectable()
export class RunUsageRepository {
  constructor(@Inject(Database) private readonly db: Database) {}

  /**
   * Adds reports to the run's sums, one statement; only while `leaseOwner` (when given) holds the
   * run's `execution`, so a worker adds to no run but the one it runs. Returns how many models changed.
   */
  async add(
    q: Queryable,
    runId: string,
    execution: number,
    reports: UsageReport[],
    now: Date,
    leaseOwner?: string,
  ): Promise<number> {
    const byModel = new Map<
      string,
      Required<Omit<UsageReport, 'model_id'>> & { n: number; cr: boolean; cw: boolean }
    >();
    for (const r of reports) {
      const m = byModel.get(r.model_id) ?? {
        input_tokens: 0,
        output_tokens: 0,
        cache_read_tokens: 0,
        cache_write_tokens: 0,
        n: 0,
        cr: false,
        cw: false,
      };
      m.input_tokens += r.input_tokens;
      m.output_tokens += r.output_tokens;
      m.cache_read_tokens += r.cache_read_tokens ?? 0;
      m.cache_write_tokens += r.cache_write_tokens ?? 0;
      m.cr ||= r.cache_read_tokens !== undefined;
      m.cw ||= r.cache_write_tokens !== undefined;
      m.n++;
      byModel.set(r.model_id, m);
    }
    if (!byModel.size) return 0;
    const models = [...byModel.entries()];
    return q.execute(
      `INSERT INTO run_token_usage AS t (run_id, model_id, input_tokens, output_tokens, cache_read_tokens,
                                         cache_write_tokens, reports, last_execution, updated_at)
       SELECT r.id, u.model_id, u.i, u.o, u.cr, u.cw, u.n, $3, $4
         FROM runs r, unnest($5::text[], $6::bigint[], $7::bigint[], $8::bigint[], $9::bigint[], $10::int[])
                WITH ORDINALITY AS u(model_id, i, o, cr, cw, n, rank)
        WHERE r.id = $1 AND r.execution = $3 AND ($2::text IS NULL OR r.lease_owner = $2)
          AND (EXISTS (SELECT 1 FROM run_token_usage k WHERE k.run_id = r.id AND k.model_id = u.model_id)
               OR (SELECT count(*) FROM run_token_usage k WHERE k.run_id = r.id) + u.rank <= ${MAX_MODELS_PER_RUN})
       ON CONFLICT (run_id, model_id) DO UPDATE SET
         input_tokens = t.input_tokens + EXCLUDED.input_tokens,
         output_tokens = t.output_tokens + EXCLUDED.output_tokens,
         cache_read_tokens = CASE WHEN EXCLUDED.cache_read_tokens IS NULL THEN t.cache_read_tokens
                                  ELSE coalesce(t.cache_read_tokens, 0) + EXCLUDED.cache_read_tokens END,
         cache_write_tokens = CASE WHEN EXCLUDED.cache_write_tokens IS NULL THEN t.cache_write_tokens
                                   ELSE coalesce(t.cache_write_tokens, 0) + EXCLUDED.cache_write_tokens END,
         reports = t.reports + EXCLUDED.reports,
         last_execution = greatest(t.last_execution, EXCLUDED.last_execution),
         updated_at = EXCLUDED.updated_at`,
      [
        runId,
        leaseOwner ?? null,
        execution,
        now,
        models.map(([id]) => id),
        models.map(([, m]) => m.input_tokens),
        models.map(([, m]) => m.output_tokens),
        models.map(([, m]) => (m.cr ? m.cache_read_tokens : null)),
        models.map(([, m]) => (m.cw ? m.cache_write_tokens : null)),
        models.map(([, m]) => m.n),
      ],
    );
  }

  /** The run's sums, by model id. */
  async forRun(runId: string): Promise<ModelUsage[]> {
    // The sums are bigint, which pg hands over as text: converted below.
    const rows = await this.db.query<{
      model_id: string;
      input_tokens: string;
      output_tokens: string;
      cache_read_tokens: string | null;
      cache_write_tokens: string | null;
      reports: number;
      last_execution: number;
      updated_at: Date;
    }>(
      `SELECT model_id, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, reports,
              last_execution, updated_at
         FROM run_token_usage WHERE run_id = $1 ORDER BY model_id`,
      [runId],
    );
    const count = (v: string | null) => (v === null ? null : Number(v));
    return rows.map((r) => ({
      modelId: r.model_id,
      inputTokens: Number(r.input_tokens),
      outputTokens: Number(r.output_tokens),
      cacheReadTokens: count(r.cache_read_tokens),
      cacheWriteTokens: count(r.cache_write_tokens),
      reports: r.reports,
      lastExecution: r.last_execution,
      updatedAt: r.updated_at,
    }));
  }
}

/**
 * A run's `model_token_usage` as RUN_COLUMNS selects it (`r` is runs): per model, every token it
 * used; null when no usage was reported.
 */
export const MODEL_TOKEN_USAGE_COLUMN = `(SELECT jsonb_agg(jsonb_build_object('model_id', u.model_id,
    'total_tokens', u.input_tokens + u.output_tokens + coalesce(u.cache_read_tokens, 0) + coalesce(u.cache_write_tokens, 0))
    ORDER BY u.model_id) FROM run_token_usage u WHERE u.run_id = r.id) AS model_token_usage`;
