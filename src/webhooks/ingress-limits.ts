import { Inject, Injectable, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import {
  RateLimiterPostgres,
  RateLimiterRedis,
  RateLimiterRes,
  type RateLimiterAbstract,
} from 'rate-limiter-flexible';
import { CONFIG, type Config } from '../config/config.js';
import { Database } from '../database/database.js';

/** Failed authentications allowed per (webhook, client address) per window before 429. */
export const AUTH_FAILURE_BUDGET = 20;
export const AUTH_FAILURE_WINDOW_SECONDS = 60;
const MINUTE = 60;

/**
 * The ingress's shared counters (PostgreSQL, or Redis when REDIS_URL is set): never process memory,
 * so every replica sees the same budget. Each returns a Retry-After in whole seconds (1–60) when refused.
 */
@Injectable()
export class IngressLimits implements OnModuleInit, OnApplicationShutdown {
  private deliveries!: RateLimiterAbstract;
  private failures!: RateLimiterAbstract;
  private redis?: { quit(): Promise<unknown> };

  constructor(
    @Inject(CONFIG) private readonly config: Config,
    @Inject(Database) private readonly db: Database,
  ) {}

  async onModuleInit(): Promise<void> {
    this.deliveries = await this.limiter('webhook_deliveries', this.config.webhookRateLimitPerMinute, MINUTE);
    this.failures = await this.limiter(
      'webhook_auth_failures',
      AUTH_FAILURE_BUDGET,
      AUTH_FAILURE_WINDOW_SECONDS,
    );
  }

  async onApplicationShutdown(): Promise<void> {
    await this.redis?.quit().catch(() => undefined);
  }

  /** Retry-After seconds when the failed-auth budget of (webhook, address) is spent, else undefined. */
  async authBudgetSpent(webhookId: string, address: string): Promise<number | undefined> {
    const res = await this.failures.get(`${webhookId}:${address}`);
    return res && res.consumedPoints >= AUTH_FAILURE_BUDGET ? retryAfter(res) : undefined;
  }

  async recordAuthFailure(webhookId: string, address: string): Promise<void> {
    await this.failures.penalty(`${webhookId}:${address}`, 1);
  }

  /** Counts one authenticated delivery; Retry-After seconds when the webhook's minute is full. */
  async takeDelivery(webhookId: string): Promise<number | undefined> {
    try {
      await this.deliveries.consume(webhookId, 1);
      return undefined;
    } catch (err) {
      if (err instanceof RateLimiterRes) return retryAfter(err);
      throw err;
    }
  }

  private async limiter(keyPrefix: string, points: number, duration: number): Promise<RateLimiterAbstract> {
    if (this.config.redisUrl) {
      // Optional dependency: only a deployment that sets REDIS_URL needs a Redis client installed.
      const moduleName = 'ioredis';
      const { Redis } = (await import(moduleName).catch(() => {
        throw new Error('REDIS_URL is set, but the package ioredis is not installed (npm install ioredis)');
      })) as { Redis: new (url: string) => { quit(): Promise<unknown> } };
      this.redis ??= new Redis(this.config.redisUrl);
      return new RateLimiterRedis({ storeClient: this.redis, keyPrefix, points, duration });
    }
    return new RateLimiterPostgres({
      storeClient: this.db.pool,
      storeType: 'pool',
      tableName: 'rate_limits',
      tableCreated: true,
      clearExpiredByTimeout: false, // the retention job deletes expired rows
      keyPrefix,
      points,
      duration,
    });
  }
}

function retryAfter(res: RateLimiterRes): number {
  return Math.min(MINUTE, Math.max(1, Math.ceil(res.msBeforeNext / 1000)));
}
