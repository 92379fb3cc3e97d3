import { Controller, Get, Inject, Param, Req } from '@nestjs/common';
import { ApiOperation } from '@nestjs/swagger';
import type { FastifyRequest } from 'fastify';
import type { AuthContext } from '../auth/auth-context.js';
import { Auth, RequireScope } from '../auth/auth.guard.js';
import { ApiJsonOk, ApiProblems, pageOf } from '../common/openapi-decorators.js';
import { parsePageRequest } from '../common/pagination.js';
import { invalidParam } from '../common/problem.js';
import { QueryParams } from '../common/query-params.js';
import { DeliveriesService } from './deliveries.service.js';
import {
  DELIVERY_STATUSES,
  deliveriesScope,
  type DeliveryListQuery,
  type DeliveryStatus,
} from './delivery-log.js';

/** The delivery log, read side: GET /api/v1/webhooks/{uid}/deliveries[/{id}]. */
@Controller('api/v1/webhooks/:uid/deliveries')
export class DeliveriesController {
  constructor(@Inject(DeliveriesService) private readonly deliveries: DeliveriesService) {}

  @Get()
  @RequireScope('runs:read')
  @ApiOperation({ summary: 'The deliveries a webhook received (its delivery log)' })
  @ApiJsonOk(pageOf('deliveries'))
  @ApiProblems(403, 404)
  list(@Auth() auth: AuthContext, @Param('uid') uid: string, @Req() req: FastifyRequest) {
    return this.deliveries.list(auth, uid, deliveryListQuery(QueryParams.of(req)));
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

function deliveryListQuery(query: QueryParams): DeliveryListQuery {
  const status = query.one('status');
  if (status !== undefined && !(DELIVERY_STATUSES as readonly string[]).includes(status))
    throw invalidParam('status', `status must be one of ${DELIVERY_STATUSES.join(', ')}`);
  const known = status as DeliveryStatus | undefined;
  return { status: known, ...parsePageRequest(query, deliveriesScope(known), { fallback: 50, max: 100 }) };
}
