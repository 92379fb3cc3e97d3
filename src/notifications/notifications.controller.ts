import { SchemaBody } from '../common/schema-body.js';
import { Controller, Delete, Get, HttpCode, Inject, Param, Patch, Post, Req } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiParam, ApiQuery, ApiResponse, ApiTags } from '@nestjs/swagger';
import type { AuthContext } from '../auth/auth-context.js';
import { Auth, RequireScope } from '../auth/auth.guard.js';
import { ApiJsonOk, ApiProblems, schemaRef } from '../common/openapi-decorators.js';
import { RequestValidator } from '../common/request-validation.js';
import type { FastifyRequest } from 'fastify';
import { UUID_PATTERN } from '../common/ids.js';
import { parseLimit } from '../common/pagination.js';
import { invalidParam } from '../common/problem.js';
import { QueryParams } from '../common/query-params.js';
import {
  MESSAGE_STATUSES,
  NotificationEndpoints,
  type MessageListQuery,
  type EndpointCreateRequest,
  type EndpointUpdateRequest,
} from './notification-endpoints.service.js';

/** `limit` of the messages list and the attempt log (parseLimit's 50 and 200 below). */
const LOG_LIMIT = ApiQuery({
  name: 'limit',
  required: false,
  schema: { type: 'integer', minimum: 1, maximum: 200, default: 50 },
});
const ENDPOINT_ID = ApiParam({
  name: 'id',
  description: 'The endpoint id',
  schema: { type: 'string', format: 'uuid' },
});

/**
 * Signed notifications out (docs/notifications.md): a team's HTTPS endpoints, their messages and
 * attempts, resend. Reads need runs:read; changes need factory:manage.
 */
@ApiTags('Notifications')
@ApiBearerAuth()
@Controller('api/v1/notifications/endpoints')
export class NotificationsController {
  constructor(
    @Inject(NotificationEndpoints) private readonly endpoints: NotificationEndpoints,
    @Inject(RequestValidator) private readonly validate: RequestValidator,
  ) {}

  @Post()
  @HttpCode(201)
  @RequireScope('factory:manage')
  @ApiOperation({
    summary: 'Subscribe an endpoint to run and delivery events',
    description: 'The answer carries the endpoint’s `whsec_` signing secret, this once.',
  })
  @ApiResponse({
    status: 201,
    description: 'Created',
    content: { 'application/json': { schema: schemaRef('NotificationEndpointWithSecret') } },
  })
  @ApiProblems(400, 403, 409)
  create(
    @Auth() auth: AuthContext,
    @SchemaBody('NotificationEndpointCreateRequest') body: EndpointCreateRequest,
  ) {
    return this.endpoints.create(auth, body);
  }

  @Get()
  @RequireScope('runs:read')
  @ApiOperation({ summary: 'The team’s notification endpoints' })
  @ApiJsonOk('NotificationEndpointListResponse')
  @ApiProblems(403)
  list(@Auth() auth: AuthContext) {
    return this.endpoints.list(auth);
  }

  @Get(':id')
  @RequireScope('runs:read')
  @ApiOperation({ summary: 'One notification endpoint' })
  @ENDPOINT_ID
  @ApiJsonOk('NotificationEndpoint')
  @ApiProblems(403, 404)
  get(@Auth() auth: AuthContext, @Param('id') id: string) {
    return this.endpoints.get(auth, id);
  }

  @Patch(':id')
  @RequireScope('factory:manage')
  @ApiOperation({
    summary: 'Change an endpoint’s URL, event types, description, or enable it again',
    description: 'Enabling clears the run of failures that disabled it; its pending messages go out again.',
  })
  @ENDPOINT_ID
  @ApiJsonOk('NotificationEndpoint')
  @ApiProblems(400, 403, 404, 409)
  update(
    @Auth() auth: AuthContext,
    @Param('id') id: string,
    @SchemaBody('NotificationEndpointUpdateRequest') body: EndpointUpdateRequest,
  ) {
    return this.endpoints.update(auth, id, body);
  }

  @Delete(':id')
  @HttpCode(204)
  @RequireScope('factory:manage')
  @ApiOperation({ summary: 'Delete an endpoint (its messages and attempts go with it)' })
  @ENDPOINT_ID
  @ApiResponse({ status: 204, description: 'Deleted' })
  @ApiProblems(403, 404, 409)
  async delete(@Auth() auth: AuthContext, @Param('id') id: string): Promise<void> {
    await this.endpoints.delete(auth, id);
  }

  @Post(':id/rotate')
  @HttpCode(200)
  @RequireScope('factory:manage')
  @ApiOperation({ summary: 'A new signing secret, shown once; the old one signs nothing more' })
  @ENDPOINT_ID
  @ApiJsonOk('NotificationEndpointWithSecret')
  @ApiProblems(403, 404, 409)
  rotate(@Auth() auth: AuthContext, @Param('id') id: string) {
    return this.endpoints.rotate(auth, id);
  }

  @Get(':id/messages')
  @RequireScope('runs:read')
  @ApiOperation({ summary: 'The endpoint’s messages, newest first' })
  @ENDPOINT_ID
  @ApiQuery({ name: 'status', required: false, enum: ['pending', 'delivered', 'failed'] })
  @LOG_LIMIT
  @ApiJsonOk('NotificationMessageListResponse')
  @ApiProblems(400, 403, 404)
  messages(@Auth() auth: AuthContext, @Param('id') id: string, @Req() req: FastifyRequest) {
    const q = QueryParams.of(req);
    const status = q.one('status');
    if (status !== undefined && !(MESSAGE_STATUSES as readonly string[]).includes(status))
      throw invalidParam('status', 'status is one of pending, delivered, failed');
    return this.endpoints.messages(auth, id, {
      status: status as MessageListQuery['status'],
      limit: parseLimit(q.one('limit'), 50, 200),
    });
  }

  @Get(':id/attempts')
  @RequireScope('runs:read')
  @ApiOperation({ summary: 'The attempt log: status, latency, response excerpt; newest first' })
  @ENDPOINT_ID
  @ApiQuery({ name: 'message_id', required: false, schema: { type: 'string', format: 'uuid' } })
  @LOG_LIMIT
  @ApiJsonOk('NotificationAttemptListResponse')
  @ApiProblems(400, 403, 404)
  attempts(@Auth() auth: AuthContext, @Param('id') id: string, @Req() req: FastifyRequest) {
    const q = QueryParams.of(req);
    const messageId = q.one('message_id');
    if (messageId !== undefined && !UUID_PATTERN.test(messageId))
      throw invalidParam('message_id', 'message_id is a message id (a UUID) from the messages list');
    return this.endpoints.attempts(auth, id, { messageId, limit: parseLimit(q.one('limit'), 50, 200) });
  }

  @Post(':id/messages/:messageId/resend')
  @HttpCode(202)
  @RequireScope('factory:manage')
  @ApiOperation({
    summary: 'Send a message again now',
    description: 'Whatever became of it; the whole retry schedule is ahead of it again.',
  })
  @ENDPOINT_ID
  @ApiParam({ name: 'messageId', description: 'The message id', schema: { type: 'string', format: 'uuid' } })
  @ApiResponse({
    status: 202,
    description: 'Queued',
    content: { 'application/json': { schema: schemaRef('NotificationMessage') } },
  })
  @ApiProblems(403, 404)
  resend(@Auth() auth: AuthContext, @Param('id') id: string, @Param('messageId') messageId: string) {
    return this.endpoints.resend(auth, id, messageId);
  }
}
