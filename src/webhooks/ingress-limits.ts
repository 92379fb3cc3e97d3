import { Inject, Injectable, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { Batcher, type Settled } from '../common/batcher.js';
import { Clock } from '../common/clock.js';
import { CONFIG, type Config } from '../config/config.js';
import { Database } from '../database/database.js';
import {
  PostgresRateWindows,
  RedisRateWindows,
  type RateWindows,
  type Take,
  type Taken,
} from './rate-windows.js';

/** Failed authentications allowed per (webhook, client address) in a sliding minute before 429. */
const AUTH_FAILURE_BUDGET = 20;

/** Why an authenticated request is refused, and its Retry-After in whole seconds (1–60). */
export interface Refusal {
  reason: 'auth_budget' | 'rate';
  retryAfter: number;
}

interface Candidate {
  webhookId: string;
  address: string;
}

const authBudget = (c: Candidate) => ({
  key: `auth:${c.webhookId}:${c.address}`,
  limit: AUTH_FAILURE_BUDGET,
});

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
    concurrency: 1,
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
    const [budget] = await this.take([{ ...authBudget({ webhookId, address }), wanted: 0 }]);
    return budget!.retryAfterMs > 0 ? seconds(budget!.retryAfterMs) : undefined;
  }

  /**
   * Counts a failed authentication. When the budget was already spent it is not counted: the
   * request is refused before authentication (Retry-After seconds returned instead).
   */
  async recordAuthFailure(webhookId: string, address: string): Promise<number | undefined> {
    const [taken] = await this.take([{ ...authBudget({ webhookId, address }), wanted: 1 }]);
    return taken!.granted === 1 ? undefined : seconds(taken!.retryAfterMs);
  }

  /**
   * For a request that passed authentication: refused when its address's failed-auth budget is spent
   * (such a request counts nowhere) or when the webhook's minute is full; counted otherwise.
   */
  admitDelivery(webhookId: string, address: string): Promise<Refusal | undefined> {
    return this.admissions.submit({ webhookId, address });
  }

  /** One take per (webhook, address) in the batch: its candidates' slots, unless that budget is spent. */
  private async admitAll(candidates: Candidate[]): Promise<Array<Settled<Refusal | undefined>>> {
    const groups = new Map<string, { candidate: Candidate; wanted: number }>();
    for (const c of candidates) {
      const key = authBudget(c).key;
      const group = groups.get(key) ?? { candidate: c, wanted: 0 };
      group.wanted++;
      groups.set(key, group);
    }
    const taken = await this.take(
      [...groups.values()].map(({ candidate, wanted }) => ({
        key: `delivery:${candidate.webhookId}`,
        limit: this.config.webhookRateLimitPerMinute,
        wanted,
        unless: authBudget(candidate),
      })),
    );
    const outcome = new Map([...groups.keys()].map((key, i) => [key, taken[i]!]));
    // Within a group, grants go to the candidates in arrival order.
    return candidates.map((c): Settled<Refusal | undefined> => {
      const t = outcome.get(authBudget(c).key)!;
      if (t.blocked)
        return { status: 'fulfilled', value: { reason: 'auth_budget', retryAfter: seconds(t.retryAfterMs) } };
      if (t.granted > 0) {
        t.granted--;
        return { status: 'fulfilled', value: undefined };
      }
      return { status: 'fulfilled', value: { reason: 'rate', retryAfter: seconds(t.retryAfterMs) } };
    });
  }

  private take(takes: Take[]): Promise<Taken[]> {
    return this.windows.take(takes, this.clock.now().getTime());
  }
}

/** Retry-After: whole seconds, 1–60. */
function seconds(ms: number): number {
  return Math.min(60, Math.max(1, Math.ceil(ms / 1000)));
}
