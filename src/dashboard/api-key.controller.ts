import { Controller, Get, Inject, Req } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { FastifyRequest } from 'fastify';
import { ChecksOwnKey } from '../auth/auth.guard.js';
import { AuthService } from '../auth/auth.service.js';
import { ApiJsonOk, ApiProblems } from '../common/openapi-decorators.js';
import { NotAuthorized } from '../common/problem.js';
import type { ApiKeyInfo } from '../contract/generated.js';

/**
 * Who the calling key is: what the dashboard needs at sign-in to offer the team choice and to show
 * only what the key may do. A multi-team key gets every team, so this route takes no X-Team-Uid.
 */
@ApiTags('API keys')
@ApiBearerAuth()
@Controller('api/v1')
export class ApiKeyController {
  constructor(@Inject(AuthService) private readonly auth: AuthService) {}

  @Get('api-key')
  @ChecksOwnKey('runs:read')
  @ApiOperation({
    summary: 'The calling API key: its principal, scopes and teams',
    description: 'Every team of the key (no X-Team-Uid needed). Never returns the key itself.',
  })
  @ApiJsonOk('ApiKeyInfo')
  @ApiProblems(403)
  async whoAmI(@Req() req: FastifyRequest): Promise<ApiKeyInfo> {
    const key = await this.auth.keyOf(req.headers.authorization);
    if (!key.scopes.includes('runs:read'))
      throw new NotAuthorized(`This API key lacks the scope runs:read (it has ${key.scopes.join(', ')}).`);
    return {
      principal: {
        type: key.principal.type,
        uid: key.principal.uid,
        display_name: key.principal.displayName,
      },
      scopes: key.scopes,
      teams: key.teams.map((t) => ({ uid: t.uid, name: t.name })),
      ...(key.workerHost ? { worker_host: key.workerHost } : {}),
    };
  }
}
