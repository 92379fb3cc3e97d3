import { Controller, Get, Header, Inject } from '@nestjs/common';
import { ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { Public } from '../auth/auth.guard.js';
import { ApiJsonOk, schemaRef } from '../common/openapi-decorators.js';
import { ApiError } from '../common/problem.js';
import { Metrics, PROMETHEUS_TEXT, SCRAPE_DEPTHS_MS } from '../common/metrics.js';
import { ReadinessRepository } from './readiness.repository.js';

const NOT_READY = ApiResponse({
  status: 503,
  description: 'Not ready (Retry-After)',
  content: { 'application/problem+json': { schema: schemaRef('Problem') } },
});

function notReady(detail: string): ApiError {
  return new ApiError(503, 'service_unavailable', 'Not ready', detail, { retryAfter: 5, retryable: true });
}

@ApiTags('Operations')
@Controller()
@Public()
export class OpsController {
  constructor(
    @Inject(ReadinessRepository) private readonly readiness: ReadinessRepository,
    @Inject(Metrics) private readonly metrics: Metrics,
  ) {}

  /** Liveness: the process answers. */
  @Get('healthz')
  @ApiOperation({ summary: 'Liveness' })
  @ApiJsonOk({ type: 'object', properties: { status: { const: 'ok' } } })
  health() {
    return { status: 'ok' };
  }

  /** Readiness: the database answers and every migration is applied. */
  @Get('readyz')
  @ApiOperation({ summary: 'Readiness: database reachable, migrations applied' })
  @ApiJsonOk({ type: 'object', properties: { status: { const: 'ready' } } })
  @NOT_READY
  async ready() {
    let pending: boolean;
    try {
      pending = await this.readiness.migrationsPending();
    } catch {
      throw notReady('The database does not answer.');
    }
    if (pending) throw notReady('Database migrations are pending.');
    return { status: 'ready' };
  }

  @Get('metrics')
  @ApiOperation({ summary: 'Prometheus metrics' })
  @ApiResponse({
    status: 200,
    description: 'Prometheus text format',
    content: { 'text/plain': { schema: { type: 'string' } } },
  })
  @Header('Content-Type', PROMETHEUS_TEXT)
  async scrape() {
    return this.metrics.scrape(SCRAPE_DEPTHS_MS);
  }
}
