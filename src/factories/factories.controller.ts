import { Body, Controller, Get, HttpCode, Inject, Param, Post, Req } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import type { AuthContext } from '../auth/auth-context.js';
import { Auth, Public, RequireScope } from '../auth/auth.guard.js';
import { publicBaseUrl, searchParams, webhookBaseUrl } from '../common/base-url.js';
import { NotFound } from '../common/problem.js';
import { BodyLimit, PROMPT_BODY_LIMIT } from '../common/route-config.js';
import { RequestValidator } from '../common/request-validation.js';
import { SchemaRegistry } from '../common/schema-validator.js';
import { CONFIG, type Config } from '../config/config.js';
import { bundleSchema, DEFINITION_SCHEMAS } from './definition-schemas.js';
import { presentApply, presentFactory, presentWebhook } from './factory.presenter.js';
import { FactoriesService } from './factories.service.js';

@Controller('api/v1')
export class FactoriesController {
  constructor(
    @Inject(FactoriesService) private readonly factories: FactoriesService,
    @Inject(RequestValidator) private readonly validate: RequestValidator,
    @Inject(SchemaRegistry) private readonly schemas: SchemaRegistry,
    @Inject(CONFIG) private readonly config: Config,
  ) {}

  @Get('factory')
  @RequireScope('runs:read')
  async list(@Auth() auth: AuthContext, @Req() req: FastifyRequest) {
    const { factories, pageInfo } = await this.factories.list(auth, searchParams(req));
    return { factories: factories.map(presentFactory), page_info: pageInfo };
  }

  @Get('factory/:uid')
  @RequireScope('runs:read')
  async get(@Auth() auth: AuthContext, @Param('uid') uid: string) {
    return presentFactory(await this.factories.get(auth, uid));
  }

  @Get('factory/:uid/applies')
  @RequireScope('runs:read')
  async applies(@Auth() auth: AuthContext, @Param('uid') uid: string, @Req() req: FastifyRequest) {
    const { applies, pageInfo } = await this.factories.applies(auth, uid, searchParams(req));
    return { applies: applies.map(presentApply), page_info: pageInfo };
  }

  @Get('factory/:uid/webhooks')
  @RequireScope('runs:read')
  async webhooks(@Auth() auth: AuthContext, @Param('uid') uid: string, @Req() req: FastifyRequest) {
    const all = searchParams(req).get('include_deleted') === 'true';
    const base = webhookBaseUrl(req, this.config);
    const rows = await this.factories.webhooks(auth, uid, all);
    return { webhooks: rows.map((w) => presentWebhook(w, base)) };
  }

  @Post('factory/:uid/runs')
  @HttpCode(200)
  @RequireScope('runs:write')
  @BodyLimit(PROMPT_BODY_LIMIT)
  dispatch(@Auth() auth: AuthContext, @Param('uid') uid: string, @Body() body: unknown) {
    return this.factories.dispatch(
      auth,
      uid,
      this.validate.body<{ prompt: string; title?: string }>('FactoryRunRequest', body),
    );
  }

  @Post('factory/:uid/refresh')
  @HttpCode(202)
  @RequireScope('factory:manage')
  refresh(@Auth() auth: AuthContext, @Param('uid') uid: string) {
    return this.factories.refresh(auth, uid);
  }

  @Get('factory-files/schemas')
  @Public()
  listSchemas(@Req() req: FastifyRequest) {
    const base = `${publicBaseUrl(req, this.config.publicBaseUrl)}/api/v1/factory-files/schemas`;
    return {
      schemas: DEFINITION_SCHEMAS.map((s) => ({
        file: s.file,
        id: s.id,
        url: `${base}/${s.name}.schema.json`,
        schema: bundleSchema(this.schemas, s.id),
      })),
    };
  }

  @Get('factory-files/schemas/:file')
  @Public()
  schema(@Param('file') file: string) {
    const s = DEFINITION_SCHEMAS.find((d) => `${d.name}.schema.json` === file);
    if (!s)
      throw new NotFound(
        `no schema ${file}; there are ${DEFINITION_SCHEMAS.map((d) => `${d.name}.schema.json`).join(', ')}`,
      );
    return bundleSchema(this.schemas, s.id);
  }
}
