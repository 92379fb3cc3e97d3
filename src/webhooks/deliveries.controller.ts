import { Controller, Get, HttpCode, Inject, Param, Post, Req } from '@nestjs/common';
import { ApiOperation, ApiQuery, ApiResponse } from '@nestjs/swagger';
import type { FastifyRequest } from 'fastify';
import type { AuthContext } from '../auth/auth-context.js';
import { Auth, RequireScope } from '../auth/auth.guard.js';
import { ApiJsonOk, ApiProblems, schemaRef } from '../common/openapi-decorators.js';
import { parsePageRequest } from '../common/pagination.js';
import { invalidParam } from '../common/problem.js';
import { QueryParams } from '../common/query-params.js';
import { findInputProblem } from '../common/storable.js';
import { FILTER_LIMITS } from '../definitions/filter-limits.js';
import { isRfc3339 } from '../runs/run-list.js';
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
  @ApiJsonOk('DeliveryListResponse')
  @ApiProblems(403, 404, 503)
  @ApiQuery({ name: 'status', required: false, schema: { type: 'string', enum: [...DELIVERY_STATUSES] } })
  @ApiQuery({
    name: 'received_after',
    required: false,
    description: 'Received at or after this time (RFC 3339)',
    schema: { type: 'string', format: 'date-time' },
  })
  @ApiQuery({
    name: 'received_before',
    required: false,
    description: 'Received before this time (RFC 3339)',
    schema: { type: 'string', format: 'date-time' },
  })
  @ApiQuery({
    name: 'delivery_id',
    required: false,
    description: 'The delivery id (identity), exactly',
    schema: { type: 'string' },
  })
  @ApiQuery({
    name: 'payload_contains',
    required: false,
    description:
      'A JSON object or array (≤ 8 KB): entries whose stored payload contains it (PostgreSQL `@>`), e.g. {"level":"error"}',
    schema: { type: 'string' },
  })
  @ApiQuery({ name: 'cursor', required: false, schema: { type: 'string' } })
  @ApiQuery({
    name: 'limit',
    required: false,
    schema: { type: 'integer', minimum: 1, maximum: 100, default: 50 },
  })
  list(@Auth() auth: AuthContext, @Param('uid') uid: string, @Req() req: FastifyRequest) {
    return this.deliveries.list(auth, uid, deliveryListQuery(QueryParams.of(req)));
  }

  @Get(':id')
  @RequireScope('runs:read')
  @ApiOperation({ summary: 'One delivery of a webhook' })
  @ApiJsonOk('DeliveryDetail', 'The delivery: what arrived, how it was judged, the runs it started')
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
    content: { 'application/json': { schema: schemaRef('DeliveryDetail') } },
  })
  @ApiProblems(403, 404, 409)
  replay(@Auth() auth: AuthContext, @Param('uid') uid: string, @Param('id') id: string) {
    return this.deliveries.replay(auth, uid, id);
  }
}

function deliveryListQuery(query: QueryParams): DeliveryListQuery {
  const status = query.one('status');
  if (status !== undefined && !(DELIVERY_STATUSES as readonly string[]).includes(status))
    throw invalidParam('status', `status must be one of ${DELIVERY_STATUSES.join(', ')}`);
  const filters = {
    status: status as DeliveryStatus | undefined,
    receivedAfter: timestamp(query, 'received_after'),
    receivedBefore: timestamp(query, 'received_before'),
    identity: query.one('delivery_id'),
    payloadContains: containment(query.one('payload_contains')),
  };
  return { ...filters, ...parsePageRequest(query, deliveriesScope(filters), { fallback: 50, max: 100 }) };
}

function timestamp(query: QueryParams, name: string): string | undefined {
  const v = query.one(name);
  if (v !== undefined && !isRfc3339(v))
    throw invalidParam(
      name,
      `${name} must be an RFC 3339 timestamp such as 2026-01-31T12:00:00Z, got "${v}"`,
    );
  return v;
}

/** payload_contains: a JSON object or array, at most the size of a filter (8 KB); returned as JSON text. */
function containment(text: string | undefined): string | undefined {
  if (text === undefined) return undefined;
  const shape = 'payload_contains must be a JSON object or array, e.g. {"level":"error"}';
  if (Buffer.byteLength(text) > FILTER_LIMITS.bytes)
    throw invalidParam('payload_contains', `payload_contains is over ${FILTER_LIMITS.bytes} bytes`);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw invalidParam('payload_contains', `${shape}; this is not valid JSON`);
  }
  if (typeof value !== 'object' || value === null) throw invalidParam('payload_contains', shape);
  // What jsonb cannot hold (NUL, lone surrogates) is a 400, never a database error.
  const unstorable = findInputProblem(value, 'payload_contains');
  if (unstorable) throw invalidParam('payload_contains', unstorable.message);
  return JSON.stringify(value);
}
