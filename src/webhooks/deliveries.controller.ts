import { Controller, Get, HttpCode, Inject, Param, Post, Query } from '@nestjs/common';
import type { AuthContext } from '../auth/auth-context.js';
import { ApiOperation, ApiResponse } from '@nestjs/swagger';
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

  @Post(':id/replay')
  @HttpCode(201)
  @RequireScope('factory:manage')
  @ApiOperation({
    summary: 'Replay an Accepted delivery against today’s automations',
    description:
      'Records a Replayed entry linked to the original (replay_of / replayed_as) and starts the runs the webhook’s automations start for it now. Every request makes a new entry.',
  })
  @ApiResponse({
    status: 201,
    description: 'The Replayed entry (`replay_of` names the original), with the runs it started',
    content: { 'application/json': { schema: { type: 'object' } } },
  })
  @ApiProblems(403, 404, 409)
  replay(@Auth() auth: AuthContext, @Param('uid') uid: string, @Param('id') id: string) {
    return this.deliveries.replay(auth, uid, id);
  }
}
