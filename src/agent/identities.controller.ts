import { SchemaBody } from '../common/schema-body.js';
import { Controller, Delete, Get, HttpCode, Inject, Param, Post, Put, Req } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiParam, ApiQuery, ApiResponse, ApiTags } from '@nestjs/swagger';
import type { FastifyRequest } from 'fastify';
import type { AuthContext } from '../auth/auth-context.js';
import { Auth, RequireScope } from '../auth/auth.guard.js';
import { QueryParams } from '../common/query-params.js';
import { ApiJsonOk, ApiProblems, schemaRef } from '../common/openapi-decorators.js';
import { RequestValidator } from '../common/request-validation.js';
import { BodyLimit, PROMPT_BODY_LIMIT } from '../common/route-config.js';
import { AgentIdentitiesService, type IdentityRequest } from './agent-identities.service.js';

const UID = ApiParam({
  name: 'uid',
  description: 'A named agent’s uid (a factory’s agent has the uid of the applied agent, a UUID)',
  schema: { type: 'string' },
});

/** Named agents (`client.agent.agent.*`): defaults a run takes with `agent_identity_uid`. */
@ApiTags('Agents')
@ApiBearerAuth()
@Controller('api/v1/agent/identities')
export class IdentitiesController {
  constructor(
    @Inject(AgentIdentitiesService) private readonly identities: AgentIdentitiesService,
    @Inject(RequestValidator) private readonly validate: RequestValidator,
  ) {}

  @Post()
  @HttpCode(201)
  @ApiOperation({ summary: 'Create a named agent of the team' })
  @ApiResponse({
    status: 201,
    description: 'Created',
    content: { 'application/json': { schema: schemaRef('AgentIdentity') } },
  })
  @ApiProblems(403, 404)
  @RequireScope('factory:manage')
  @BodyLimit(PROMPT_BODY_LIMIT) // a prompt of up to 100,000 characters
  create(@Auth() auth: AuthContext, @SchemaBody('AgentIdentityCreateRequest') body: IdentityRequest) {
    return this.identities.create(auth, body);
  }

  @Get()
  @ApiOperation({ summary: 'The team’s named agents: its own and its factories’ agents' })
  @ApiQuery({ name: 'factory_uid', required: false, schema: { type: 'string' } })
  @ApiJsonOk({
    type: 'object',
    required: ['agents'],
    properties: { agents: { type: 'array', items: schemaRef('AgentIdentity') } },
  })
  @ApiProblems(403)
  @RequireScope('runs:read')
  list(@Auth() auth: AuthContext, @Req() req: FastifyRequest) {
    return this.identities.list(auth, QueryParams.of(req).one('factory_uid'));
  }

  @Get(':uid')
  @ApiOperation({ summary: 'One named agent' })
  @UID
  @ApiJsonOk('AgentIdentity')
  @ApiProblems(403, 404)
  @RequireScope('runs:read')
  get(@Auth() auth: AuthContext, @Param('uid') uid: string) {
    return this.identities.get(auth, uid);
  }

  @Put(':uid')
  @ApiOperation({ summary: 'Update a named agent: omitted or null unchanged, empty cleared' })
  @UID
  @ApiJsonOk('AgentIdentity')
  @ApiProblems(403, 404, 409)
  @RequireScope('factory:manage')
  @BodyLimit(PROMPT_BODY_LIMIT)
  update(
    @Auth() auth: AuthContext,
    @Param('uid') uid: string,
    @SchemaBody('AgentIdentityUpdateRequest', { optional: true }) body: IdentityRequest,
  ) {
    return this.identities.update(auth, uid, body);
  }

  @Delete(':uid')
  @HttpCode(204)
  @ApiOperation({ summary: 'Delete a named agent (runs that ran as it keep their executor)' })
  @UID
  @ApiResponse({ status: 204, description: 'Deleted' })
  @ApiProblems(403, 404, 409)
  @RequireScope('factory:manage')
  async delete(@Auth() auth: AuthContext, @Param('uid') uid: string): Promise<void> {
    await this.identities.delete(auth, uid);
  }
}
