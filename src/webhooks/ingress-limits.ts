import { Inject, Injectable, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { Batcher, type Settled } from '../common/batcher.js';
import { Clock } from '../common/clock.js';
import { CONFIG, type Config } from '../config/config.js';
import { Database } from '../database/database.js';
import { PostgresRateWindows, RedisRateWindows, type RateWindows } from './rate-windows.js';

/** Failed authentications allowed per (webhook, client address) in a sliding minute before 429. */
export const AUTH_FAILURE_BUDGET = 20;

/** Why an authenticated request is refused, and its Retry-After in whole seconds (1–60). */
export interface Refusal {
  reason: 'auth_budget' | 'rate';
  retryAfter: number;
}

interface Candidate {
  webhookId: string;
  address: string;
}

const budgetKey = (c: Candidate) => `auth:${c.webhookId}:${c.address}`;
const rateKey = (webhookId: string) => `delivery:${webhookId}`;

/**
 * The ingress's two sliding windows (PostgreSQL, or Redis when REDIS_URL is set; never process
 * memory, so every replica sees the same counts): failed authentications per (webhook, address),
 * and authenticated deliveries per webhook. Concurrent admissions share one round trip per window.
 */
@Injectable()
export class IngressLimits implements OnModuleInit, OnApplicationShutdown {
  private windows!: RateWindows;
  private readonly admissions = new Batcher<Candidate, Refusal | undefined>((c) => this.admitAll(c), {
    maxItems: 500,
    concurrency: 2,
  });

  constructor(
    @Inject(CONFIG) private readonly config: Config,
    @Inject(Database) private readonly db: Database,
    @Inject(Clock) private readonly clock: Clock,
  ) {}

  async onModuleInit(): Promise<void> {
    this.windows = this.config.redisUrl
      ? await RedisRateWindows.connect(this.config.redisUrl)
      : new PostgresRateWindows(this.db);
  }

  async onApplicationShutdown(): Promise<void> {
    await this.windows?.close();
  }

  /** Retry-After seconds when the failed-auth budget of (webhook, address) is spent, else undefined. */
  async authBudgetSpent(webhookId: string, address: string): Promise<number | undefined> {
    const [gate] = await this.take([
      { key: budgetKey({ webhookId, address }), limit: AUTH_FAILURE_BUDGET, wanted: 0 },
    ]);
    return gate!.retryAfterMs > 0 ? seconds(gate!.retryAfterMs) : undefined;
  }

  /**
   * Counts a failed authentication. When the budget was already spent it is not counted: the
   * request is refused before authentication (Retry-After seconds returned instead).
   */
  async recordAuthFailure(webhookId: string, address: string): Promise<number | undefined> {
    const [taken] = await this.take([
      { key: budgetKey({ webhookId, address }), limit: AUTH_FAILURE_BUDGET, wanted: 1 },
    ]);
    return taken!.granted === 1 ? undefined : seconds(taken!.retryAfterMs);
  }

  /**
   * For a request that passed authentication: refused when its address's failed-auth budget is spent
   * (such a request counts nowhere) or when the webhook's minute is full; counted otherwise.
   */
  admitDelivery(webhookId: string, address: string): Promise<Refusal | undefined> {
    return this.admissions.submit({ webhookId, address });
  }

  private async admitAll(candidates: Candidate[]): Promise<Array<Settled<Refusal | undefined>>> {
    const gateKeys = [...new Set(candidates.map(budgetKey))];
    const gates = await this.take(gateKeys.map((key) => ({ key, limit: AUTH_FAILURE_BUDGET, wanted: 0 })));
    const spent = new Map(gateKeys.map((key, i) => [key, gates[i]!.retryAfterMs]));
    const wanted = new Map<string, number>();
    for (const c of candidates) {
      if (!spent.get(budgetKey(c))) wanted.set(c.webhookId, (wanted.get(c.webhookId) ?? 0) + 1);
    }
    const hooks = [...wanted.keys()];
    const taken = await this.take(
      hooks.map((id) => ({
        key: rateKey(id),
        limit: this.config.webhookRateLimitPerMinute,
        wanted: wanted.get(id)!,
      })),
    );
    const left = new Map(hooks.map((id, i) => [id, taken[i]!]));
    // Grants go to the candidates in arrival order.
    return candidates.map((c): Settled<Refusal | undefined> => {
      const gate = spent.get(budgetKey(c))!;
      if (gate) return { status: 'fulfilled', value: { reason: 'auth_budget', retryAfter: seconds(gate) } };
      const rate = left.get(c.webhookId)!;
      if (rate.granted > 0) {
        rate.granted--;
        return { status: 'fulfilled', value: undefined };
      }
      return { status: 'fulfilled', value: { reason: 'rate', retryAfter: seconds(rate.retryAfterMs) } };
    });
  }

  private take(takes: Array<{ key: string; limit: number; wanted: number }>) {
    return takes.length ? this.windows.take(takes, this.clock.now().getTime()) : Promise.resolve([]);
  }
}

/** Retry-After: whole seconds, 1–60. */
function seconds(ms: number): number {
  return Math.min(60, Math.max(1, Math.ceil(ms / 1000)));
}
