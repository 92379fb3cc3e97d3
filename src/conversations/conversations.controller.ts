import { Controller, Get, Inject, Param, Query } from '@nestjs/common';
import type { AuthContext } from '../auth/auth-context.js';
import { ApiBearerAuth, ApiOperation, ApiTags } from '@nestjs/swagger';
import { Auth, RequireScope } from '../auth/auth.guard.js';
import { ApiJsonOk, ApiProblems } from '../common/openapi-decorators.js';
import { ConversationsService } from './conversations.service.js';

@Controller('api/v1')
@ApiTags('Runs')
@ApiBearerAuth()
@ApiProblems(403, 404)
export class ConversationsController {
  constructor(@Inject(ConversationsService) private readonly conversations: ConversationsService) {}

  @Get('agent/runs/:runId/conversation')
  @ApiOperation({
    summary:
      "A run's conversation, in order: the Oz clients' `steps` (one per execution) and factoryd's flat `messages`",
  })
  @ApiJsonOk('RunConversationResponse')
  @RequireScope('runs:read')
  conversation(@Auth() auth: AuthContext, @Param('runId') runId: string) {
    return this.conversations.conversation(auth.team.id, runId);
  }

  @Get('skills/usage')
  @ApiOperation({ summary: 'Team-owned skill usage (bundled skills grouped apart)' })
  @ApiJsonOk('SkillUsageResponse')
  @RequireScope('runs:read')
  usage(@Auth() auth: AuthContext, @Query('since') since?: string) {
    return this.conversations.skillUsage(auth.team.id, since);
  }
}
