import { SchemaBody } from '../common/schema-body.js';
import type { RunFollowupRequest } from '../contract/generated.js';
import { Controller, Get, Header, HttpCode, Inject, Param, Post, Req } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiParam, ApiResponse, ApiTags } from '@nestjs/swagger';
import type { FastifyRequest } from 'fastify';
import type { AuthContext } from '../auth/auth-context.js';
import { Auth, RequireScope } from '../auth/auth.guard.js';
import { publicBaseUrl } from '../common/base-url.js';
import { Clock } from '../common/clock.js';
import { ApiJsonOk, ApiProblems, ApiQueryParams } from '../common/openapi-decorators.js';
import { BodyLimit, PROMPT_BODY_LIMIT } from '../common/route-config.js';
import { QueryParams } from '../common/query-params.js';
import { RequestValidator } from '../common/request-validation.js';
import { parseRunListQuery } from './run-list.js';
import { CONFIG, type Config } from '../config/config.js';
import { presentRun } from './run.presenter.js';
import { RunsService, type RunCreateRequest } from './runs.service.js';

/**
 * A run's body: up to ten 1 MiB attachments in base64 (13.3 MiB) with the prompt and config; the
 * attachments and images together may not pass it. The API's only large body.
 */
const RUN_CREATE_BODY_LIMIT = 16 * 1024 * 1024;

const RUN_ID = ApiParam({ name: 'runId', description: 'The run id (a UUID)', schema: { type: 'string' } });

@ApiTags('Runs')
@ApiBearerAuth()
@Controller('api/v1/agent')
export class RunsController {
  constructor(
    @Inject(RunsService) private readonly runs: RunsService,
    @Inject(RequestValidator) private readonly validate: RequestValidator,
    @Inject(Clock) private readonly clock: Clock,
    @Inject(CONFIG) private readonly config: Config,
  ) {}

  @Post(['runs', 'run'])
  @HttpCode(200)
  @ApiOperation({ summary: 'Start an agent run (POST /agent/run is an alias)' })
  @ApiJsonOk('RunCreateResponse', 'The run is QUEUED')
  @ApiProblems(403, 404, 429)
  @RequireScope('runs:write')
  @BodyLimit(RUN_CREATE_BODY_LIMIT)
  create(
    @Auth() auth: AuthContext,
    @SchemaBody('RunCreateRequest') body: RunCreateRequest,
    @Req() req: FastifyRequest,
  ) {
    // The factoryd CLI says who it is; everything else that calls the API is an API caller.
    const source = req.headers['user-agent']?.startsWith('factoryd-cli/') ? 'CLI' : 'API';
    return this.runs.createFromApi(auth, body, source);
  }

  @Get('runs')
  @ApiOperation({ summary: 'List runs, newest update first, keyset-paginated' })
  @ApiQueryParams('RunListQuery')
  @ApiJsonOk('RunListResponse')
  @ApiProblems(403, 503)
  @RequireScope('runs:read')
  async list(@Auth() auth: AuthContext, @Req() req: FastifyRequest) {
    const { runs, pageInfo } = await this.runs.list(auth, parseRunListQuery(QueryParams.of(req)));
    const base = publicBaseUrl(req, this.config.publicBaseUrl);
    const now = this.clock.now();
    return { runs: runs.map((r) => presentRun(r, base, now)), page_info: pageInfo };
  }

  @Get('runs/:runId')
  @ApiOperation({ summary: 'One run' })
  @RUN_ID
  @ApiJsonOk('RunItem')
  @ApiProblems(403, 404)
  @RequireScope('runs:read')
  async get(@Auth() auth: AuthContext, @Param('runId') runId: string, @Req() req: FastifyRequest) {
    const run = await this.runs.get(auth, runId);
    return presentRun(run, publicBaseUrl(req, this.config.publicBaseUrl), this.clock.now());
  }

  @Post('runs/:runId/followups')
  @HttpCode(200)
  @ApiOperation({ summary: 'Send a follow-up; an ended run continues in the same conversation (QUEUED)' })
  @RUN_ID
  @ApiJsonOk('RunFollowupResponse', 'Accepted')
  @ApiProblems(403, 404)
  @RequireScope('runs:write')
  @BodyLimit(PROMPT_BODY_LIMIT)
  followup(
    @Auth() auth: AuthContext,
    @Param('runId') runId: string,
    @SchemaBody('RunFollowupRequest', { optional: true }) body: RunFollowupRequest,
  ) {
    const req = body;
    return this.runs.followup(auth, runId, req.message, req.mode);
  }

  /** 202: the worker stops the turn asynchronously (the harness answers BLOCKED), as the clients expect. */
  @Post('runs/:runId/interrupt')
  @HttpCode(202)
  @ApiOperation({
    summary: 'Stop the turn an INPROGRESS run is at; the run stays live (BLOCKED) and a follow-up resumes it',
  })
  @RUN_ID
  @ApiResponse({
    status: 202,
    description: 'Accepted: the run’s worker stops the turn',
    content: { 'application/json': { schema: { type: 'object', additionalProperties: false } } },
  })
  @ApiProblems(403, 404, 409)
  @RequireScope('runs:write')
  async interrupt(@Auth() auth: AuthContext, @Param('runId') runId: string) {
    await this.runs.interrupt(auth, runId);
    return {};
  }

  /** 200 with the run id as a JSON string, as the Oz clients expect. */
  @Post('runs/:runId/cancel')
  @HttpCode(200)
  @ApiOperation({ summary: 'Cancel a run; the body is the run id as a JSON string' })
  @RUN_ID
  @ApiJsonOk({ type: 'string', format: 'uuid', description: 'The cancelled run id' }, 'Cancelled')
  @ApiProblems(403, 404, 409)
  @Header('Content-Type', 'application/json; charset=utf-8')
  @RequireScope('runs:write')
  async cancel(@Auth() auth: AuthContext, @Param('runId') runId: string) {
    await this.runs.cancel(auth, runId);
    return JSON.stringify(runId);
  }
}
