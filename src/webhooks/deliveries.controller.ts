import { Controller, Get, Inject, Param, Query } from '@nestjs/common';
import type { AuthContext } from '../auth/auth-context.js';
import { ApiOperation } from '@nestjs/swagger';
import { Auth, RequireScope } from '../auth/auth.guard.js';
import { ApiJsonOk, ApiProblems, pageOf } from '../common/openapi-decorators.js';
import { DeliveriesService } from './deliveries.service.js';

/** The delivery log, read side: GET /api/v1/webhooks/{uid}/deliveries[/{id}]. */
@Controller('api/v1/webhooks/:uid/deliveries')
export class DeliveriesController {
  constructor(@Inject(DeliveriesService) private readonly deliveries: DeliveriesService) {}

  @Get()
  @RequireScope('runs:read')
  @ApiOperation({ summary: 'The deliveries a webhook received (its delivery log)' })
  @ApiJsonOk(pageOf('deliveries'))
  @ApiProblems(403, 404)
  list(@Auth() auth: AuthContext, @Param('uid') uid: string, @Query() query: Record<string, unknown>) {
    return this.deliveries.list(auth, uid, query);
  }

  @Get(':id')
  @RequireScope('runs:read')
  @ApiOperation({ summary: 'One delivery of a webhook' })
  @ApiJsonOk({ type: 'object' }, 'The delivery: what arrived, how it was judged, the runs it started')
  @ApiProblems(403, 404)
  get(@Auth() auth: AuthContext, @Param('uid') uid: string, @Param('id') id: string) {
    return this.deliveries.get(auth, uid, id);
  }
}
