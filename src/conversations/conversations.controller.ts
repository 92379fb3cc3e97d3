import { Controller, Get, Inject, Param, Query } from '@nestjs/common';
import type { AuthContext } from '../auth/auth-context.js';
import { Auth, RequireScope } from '../auth/auth.guard.js';
import { ConversationsService } from './conversations.service.js';

@Controller('api/v1')
export class ConversationsController {
  constructor(@Inject(ConversationsService) private readonly conversations: ConversationsService) {}

  @Get('agent/runs/:runId/conversation')
  @RequireScope('runs:read')
  conversation(@Auth() auth: AuthContext, @Param('runId') runId: string) {
    return this.conversations.conversation(auth.team.id, runId);
  }

  @Get('skills/usage')
  @RequireScope('runs:read')
  usage(@Auth() auth: AuthContext, @Query('since') since?: string) {
    return this.conversations.skillUsage(auth.team.id, since);
  }
}
