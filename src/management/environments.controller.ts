import { SchemaBody } from '../common/schema-body.js';
import { Controller, Delete, HttpCode, Inject, Param, Post, Put } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiParam, ApiResponse, ApiTags } from '@nestjs/swagger';
import type { AuthContext } from '../auth/auth-context.js';
import { Auth, RequireScope } from '../auth/auth.guard.js';
import { ApiJsonOk, ApiProblems } from '../common/openapi-decorators.js';
import { RequestValidator } from '../common/request-validation.js';
import { EnvironmentManagement, type EnvironmentRequest } from './environment-management.service.js';

const ENVIRONMENT_UID = ApiParam({
  name: 'uid',
  description: 'The environment uid (or name)',
  schema: { type: 'string' },
});
const ENVIRONMENT = { type: 'object', description: 'CloudEnvironment' } as const;

/**
 * The environments API's writes (docs/environments.md): a managed factory's environments/<name>.yaml,
 * committed and applied; a repository-backed factory answers 409 naming the file to commit. The reads
 * (GET /agent/environments, /agent/environments/{uid}) are the agent catalog's.
 */
@ApiTags('Agents')
@ApiBearerAuth()
@Controller('api/v1/agent/environments')
export class EnvironmentsController {
  constructor(
    @Inject(EnvironmentManagement) private readonly environments: EnvironmentManagement,
    @Inject(RequestValidator) private readonly validate: RequestValidator,
  ) {}

  @Post()
  @HttpCode(201)
  @RequireScope('factory:manage')
  @ApiOperation({ summary: 'Create an environment in a managed factory (commits environments/<name>.yaml)' })
  @ApiResponse({
    status: 201,
    description: 'Created and applied',
    content: { 'application/json': { schema: ENVIRONMENT } },
  })
  @ApiProblems(400, 403, 404, 409)
  create(@Auth() auth: AuthContext, @SchemaBody('EnvironmentRequest') body: EnvironmentRequest) {
    return this.environments.create(auth, body);
  }

  @Put(':uid')
  @RequireScope('factory:manage')
  @ApiOperation({ summary: 'Replace an environment of a managed factory (its file rewritten and applied)' })
  @ENVIRONMENT_UID
  @ApiJsonOk(ENVIRONMENT)
  @ApiProblems(400, 403, 404, 409)
  replace(
    @Auth() auth: AuthContext,
    @Param('uid') uid: string,
    @SchemaBody('EnvironmentRequest') body: EnvironmentRequest,
  ) {
    return this.environments.replace(auth, uid, body);
  }

  @Delete(':uid')
  @HttpCode(204)
  @RequireScope('factory:manage')
  @ApiOperation({ summary: 'Delete an environment of a managed factory (its file removed)' })
  @ENVIRONMENT_UID
  @ApiResponse({ status: 204, description: 'Deleted' })
  @ApiProblems(403, 404, 409)
  async remove(@Auth() auth: AuthContext, @Param('uid') uid: string): Promise<void> {
    await this.environments.remove(auth, uid);
  }
}
