import { Controller, Get, Inject, Param, Req, Res } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiParam, ApiQuery, ApiResponse, ApiTags } from '@nestjs/swagger';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AuthContext } from '../auth/auth-context.js';
import { Auth, Public, RequireScope } from '../auth/auth.guard.js';
import { publicBaseUrl } from '../common/base-url.js';
import { ApiJsonOk, ApiProblem, ApiProblems } from '../common/openapi-decorators.js';
import { QueryParams } from '../common/query-params.js';
import { CONFIG, type Config } from '../config/config.js';
import { ModelsService } from './models.service.js';
import { RunHarnessService } from './run-harness.service.js';

const RUN_ID = ApiParam({ name: 'runId', description: 'The run id (a UUID)', schema: { type: 'string' } });

/** What real harnesses give meaning to: the models, a run's raw transcript and its token usage. */
@ApiTags('Runs')
@ApiBearerAuth()
@Controller('api/v1/agent')
export class RunHarnessController {
  constructor(
    @Inject(ModelsService) private readonly models: ModelsService,
    @Inject(RunHarnessService) private readonly harness: RunHarnessService,
    @Inject(CONFIG) private readonly config: Config,
  ) {}

  @Get('models')
  @ApiOperation({
    summary: 'The models the team’s runs can use: HARNESS_MODELS and what the detected CLIs report',
  })
  @ApiJsonOk('AgentListModelsResponse')
  @ApiProblems(403)
  @RequireScope('runs:read')
  list(@Auth() auth: AuthContext) {
    return this.models.list(auth);
  }

  @Get('runs/:runId/harness-usage')
  @ApiOperation({
    summary: 'The tokens a Claude Code or Codex run used, summed, in the CLI’s own categories',
  })
  @RUN_ID
  @ApiJsonOk('RunHarnessUsageResponse')
  @ApiProblems(403, 404)
  @RequireScope('runs:read')
  harnessUsage(@Auth() auth: AuthContext, @Param('runId') runId: string) {
    return this.harness.harnessUsage(auth, runId);
  }

  @Get('runs/:runId/transcript')
  @ApiOperation({ summary: 'The raw harness transcript: a 302 to a signed download link (15 minutes)' })
  @RUN_ID
  @ApiResponse({ status: 302, description: 'To the signed link (`Location`), which needs no key' })
  @ApiProblems(403, 404)
  @RequireScope('runs:read')
  async transcript(
    @Auth() auth: AuthContext,
    @Param('runId') runId: string,
    @Req() req: FastifyRequest,
    @Res({ passthrough: true }) reply: FastifyReply,
  ) {
    const link = await this.harness.transcriptLink(
      auth,
      runId,
      publicBaseUrl(req, this.config.publicBaseUrl),
    );
    void reply.code(302).header('Location', link).header('Cache-Control', 'no-store');
    return '';
  }

  @Get('runs/:runId/transcript/download')
  @Public()
  @ApiOperation({ summary: 'A run’s raw transcript, through the signed link the transcript route gives' })
  @RUN_ID
  @ApiQuery({ name: 'expires', required: true, schema: { type: 'string' } })
  @ApiQuery({ name: 'signature', required: true, schema: { type: 'string' } })
  @ApiResponse({
    status: 200,
    description: 'Every line the harness printed that was no protocol event, in order',
    content: { 'text/plain': { schema: { type: 'string' } } },
  })
  @ApiProblem(403, 'The link is invalid or has expired')
  @ApiProblem(404)
  @ApiProblem(500)
  transcriptDownload(
    @Param('runId') runId: string,
    @Req() req: FastifyRequest,
    @Res({ passthrough: true }) reply: FastifyReply,
  ) {
    const q = QueryParams.of(req);
    const body = this.harness.transcript(runId, q.one('expires'), q.one('signature'));
    void reply
      .header('Content-Type', 'text/plain; charset=utf-8')
      .header('Content-Disposition', `attachment; filename="transcript-${runId}.txt"`)
      .header('X-Content-Type-Options', 'nosniff');
    return body;
  }
}
