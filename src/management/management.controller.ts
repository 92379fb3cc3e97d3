import { SchemaBody } from '../common/schema-body.js';
import type { WebhookTestFilterRequest } from '../contract/generated.js';
import type { WebhookSecretRequest } from '../contract/generated.js';
import { Controller, Delete, Get, HttpCode, Inject, Param, Patch, Post, Req } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiParam, ApiResponse, ApiTags } from '@nestjs/swagger';
import type { FastifyRequest } from 'fastify';
import type { AuthContext } from '../auth/auth-context.js';
import { Auth, RequireScope } from '../auth/auth.guard.js';
import { webhookBaseUrl } from '../common/base-url.js';
import { ApiJsonOk, ApiProblems, schemaRef } from '../common/openapi-decorators.js';
import { RequestValidator } from '../common/request-validation.js';
import { CONFIG, type Config } from '../config/config.js';
import { FilterTests, type TestFilterRequest } from './test-filter.service.js';
import { filterFromText, type GivenFilter } from './test-filter.js';
import type { WebhookCreateRequest, WebhookUpdateRequest } from '../contract/generated.js';
import { WebhookManagement } from './webhook-management.service.js';
import { presentManagedWebhook, presentWithSecret } from './webhook.presenter.js';

const WEBHOOK_UID = ApiParam({
  name: 'uid',
  description: 'The webhook UID (22 characters)',
  schema: { type: 'string' },
});

/**
 * The dashboard's webhook operations (docs/webhooks.md, "Managing webhooks"). Writes need
 * factory:manage and work on managed factories; a repository-backed factory answers 409.
 */
@ApiTags('Webhook management')
@ApiBearerAuth()
@Controller('api/v1')
export class ManagementController {
  constructor(
    @Inject(WebhookManagement) private readonly webhooks: WebhookManagement,
    @Inject(FilterTests) private readonly filters: FilterTests,
    @Inject(RequestValidator) private readonly validate: RequestValidator,
    @Inject(CONFIG) private readonly config: Config,
  ) {}

  @Post('factory/:uid/webhooks')
  @HttpCode(201)
  @RequireScope('factory:manage')
  @ApiOperation({
    summary: 'Create a webhook in a managed factory',
    description:
      'Commits webhooks/<name>.yaml (author: the caller) and applies it. `secret` in the answer only when generated now.',
  })
  @ApiParam({ name: 'uid', description: 'The factory UID', schema: { type: 'string' } })
  @ApiResponse({
    status: 201,
    description: 'Created and applied',
    content: { 'application/json': { schema: schemaRef('WebhookWithSecret') } },
  })
  @ApiProblems(403, 404, 409)
  async create(
    @Auth() auth: AuthContext,
    @Param('uid') uid: string,
    @SchemaBody('WebhookCreateRequest') body: WebhookCreateRequest,
    @Req() req: FastifyRequest,
  ) {
    const out = await this.webhooks.create(auth, uid, body);
    return presentWithSecret(out, webhookBaseUrl(req, this.config));
  }

  @Get('webhooks/:uid')
  @RequireScope('runs:read')
  @ApiOperation({ summary: 'One webhook (live or deleted)' })
  @WEBHOOK_UID
  @ApiJsonOk('WebhookItem')
  @ApiProblems(403, 404)
  async get(@Auth() auth: AuthContext, @Param('uid') uid: string, @Req() req: FastifyRequest) {
    return presentManagedWebhook(await this.webhooks.get(auth, uid), webhookBaseUrl(req, this.config));
  }

  @Patch('webhooks/:uid')
  @RequireScope('factory:manage')
  @ApiOperation({
    summary: 'Change a webhook’s delivery-id header or description',
    description:
      'A rename, or a change of auth_mode, signature_scheme or secret_name, is 400 operation_not_supported.',
  })
  @WEBHOOK_UID
  @ApiJsonOk('WebhookItem')
  @ApiProblems(403, 404, 409)
  async update(
    @Auth() auth: AuthContext,
    @Param('uid') uid: string,
    @SchemaBody('WebhookUpdateRequest') body: WebhookUpdateRequest,
    @Req() req: FastifyRequest,
  ) {
    const w = await this.webhooks.update(auth, uid, body);
    return presentManagedWebhook(w, webhookBaseUrl(req, this.config));
  }

  @Post('webhooks/:uid/enable')
  @HttpCode(200)
  @RequireScope('factory:manage')
  @ApiOperation({ summary: 'Enable a webhook' })
  @WEBHOOK_UID
  @ApiJsonOk('WebhookItem')
  @ApiProblems(403, 404, 409)
  async enable(@Auth() auth: AuthContext, @Param('uid') uid: string, @Req() req: FastifyRequest) {
    return presentManagedWebhook(
      await this.webhooks.setEnabled(auth, uid, true),
      webhookBaseUrl(req, this.config),
    );
  }

  @Post('webhooks/:uid/disable')
  @HttpCode(200)
  @RequireScope('factory:manage')
  @ApiOperation({ summary: 'Disable a webhook (senders get 404 until it is enabled)' })
  @WEBHOOK_UID
  @ApiJsonOk('WebhookItem')
  @ApiProblems(403, 404, 409)
  async disable(@Auth() auth: AuthContext, @Param('uid') uid: string, @Req() req: FastifyRequest) {
    return presentManagedWebhook(
      await this.webhooks.setEnabled(auth, uid, false),
      webhookBaseUrl(req, this.config),
    );
  }

  @Post('webhooks/:uid/rotate')
  @HttpCode(200)
  @RequireScope('factory:manage')
  @ApiOperation({
    summary: 'Rotate a webhook’s secret',
    description: 'A new generated secret, returned once; the old one fails at once.',
  })
  @WEBHOOK_UID
  @ApiJsonOk('WebhookWithSecret')
  @ApiProblems(403, 404, 409)
  async rotate(@Auth() auth: AuthContext, @Param('uid') uid: string, @Req() req: FastifyRequest) {
    return presentWithSecret(await this.webhooks.rotate(auth, uid), webhookBaseUrl(req, this.config));
  }

  @Post('webhooks/:uid/secret')
  @HttpCode(200)
  @RequireScope('factory:manage')
  @ApiOperation({
    summary: 'Set a signature webhook’s signing secret',
    description:
      'The value the provider issued; blank for standard_webhooks generates one (returned once). Enables a webhook created awaiting its secret.',
  })
  @WEBHOOK_UID
  @ApiJsonOk('WebhookWithSecret')
  @ApiProblems(403, 404, 409)
  async secret(
    @Auth() auth: AuthContext,
    @Param('uid') uid: string,
    @SchemaBody('WebhookSecretRequest', { optional: true }) body: WebhookSecretRequest,
    @Req() req: FastifyRequest,
  ) {
    const request = body;
    return presentWithSecret(
      await this.webhooks.setSecret(auth, uid, request),
      webhookBaseUrl(req, this.config),
    );
  }

  @Delete('webhooks/:uid')
  @HttpCode(204)
  @RequireScope('factory:manage')
  @ApiOperation({ summary: 'Delete a webhook (senders get 404 at once)' })
  @WEBHOOK_UID
  @ApiResponse({ status: 204, description: 'Deleted' })
  @ApiProblems(403, 404, 409)
  async delete(@Auth() auth: AuthContext, @Param('uid') uid: string): Promise<void> {
    await this.webhooks.delete(auth, uid);
  }

  @Post('webhooks/:uid/test-filter')
  @HttpCode(200)
  @RequireScope('runs:read')
  @ApiOperation({
    summary: 'Test filter: would a stored delivery start a run?',
    description:
      'An automation’s trigger, or a filter given here, against an Accepted delivery (default: the newest).',
  })
  @WEBHOOK_UID
  @ApiJsonOk('WebhookTestFilterResponse')
  @ApiProblems(403, 404)
  testFilter(
    @Auth() auth: AuthContext,
    @Param('uid') uid: string,
    @SchemaBody('WebhookTestFilterRequest', { optional: true }) body: WebhookTestFilterRequest,
  ) {
    const request = body;
    // A filter's text is read, then held to the same schema as a filter given as an object.
    const given =
      typeof request.filter === 'string'
        ? this.validate.body<TestFilterRequest & { filter?: GivenFilter }>('WebhookTestFilterRequest', {
            ...request,
            filter: filterFromText(request.filter),
          })
        : (request as TestFilterRequest & { filter?: GivenFilter });
    return this.filters.run(auth, uid, given);
  }
}
