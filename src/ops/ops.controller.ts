import { Controller, Get, Header, Inject } from '@nestjs/common';
import { Public } from '../auth/auth.guard.js';
import { ApiError } from '../common/problem.js';
import { Database } from '../database/database.js';
import { Metrics } from './metrics.js';

@Controller()
@Public()
export class OpsController {
  constructor(
    @Inject(Database) private readonly db: Database,
    @Inject(Metrics) private readonly metrics: Metrics,
  ) {}

  /** Liveness: the process answers. */
  @Get('healthz')
  health() {
    return { status: 'ok' };
  }

  /** Readiness: the database answers and every migration is applied. */
  @Get('readyz')
  async ready() {
    try {
      await this.db.query('SELECT 1');
    } catch {
      throw new ApiError(503, 'service_unavailable', 'Not ready', 'The database does not answer.', {
        retryAfter: 5,
        retryable: true,
      });
    }
    if (await this.db.dataSource.showMigrations()) {
      throw new ApiError(503, 'service_unavailable', 'Not ready', 'Database migrations are pending.', {
        retryAfter: 5,
        retryable: true,
      });
    }
    return { status: 'ready' };
  }

  @Get('metrics')
  @Header('Content-Type', 'text/plain; version=0.0.4; charset=utf-8')
  async scrape() {
    return this.metrics.registry.metrics();
  }
}
