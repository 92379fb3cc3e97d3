import { Body, Controller, Get, Header, HttpCode, Inject, Param, Post, Req } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import type { AuthContext } from '../auth/auth-context.js';
import { Auth, RequireScope } from '../auth/auth.guard.js';
import { publicBaseUrl, searchParams } from '../common/base-url.js';
import { Clock } from '../common/clock.js';
import { RequestValidator } from '../common/request-validation.js';
import { CONFIG, type Config } from '../config/config.js';
import { presentRun } from './run.presenter.js';
import { RunsService, type RunCreateRequest } from './runs.service.js';

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
  @RequireScope('runs:write')
  create(@Auth() auth: AuthContext, @Body() body: unknown, @Req() req: FastifyRequest) {
    // The factoryd CLI says who it is; everything else that calls the API is an API caller.
    const source = req.headers['user-agent']?.startsWith('factoryd-cli/') ? 'CLI' : 'API';
    return this.runs.createFromApi(
      auth,
      this.validate.body<RunCreateRequest>('RunCreateRequest', body),
      source,
    );
  }

  @Get('runs')
  @RequireScope('runs:read')
  async list(@Auth() auth: AuthContext, @Req() req: FastifyRequest) {
    const { runs, pageInfo } = await this.runs.list(auth, searchParams(req));
    const base = publicBaseUrl(req, this.config.publicBaseUrl);
    const now = this.clock.now();
    return { runs: runs.map((r) => presentRun(r, base, now)), page_info: pageInfo };
  }

  @Get('runs/:runId')
  @RequireScope('runs:read')
  async get(@Auth() auth: AuthContext, @Param('runId') runId: string, @Req() req: FastifyRequest) {
    const run = await this.runs.get(auth, runId);
    return presentRun(run, publicBaseUrl(req, this.config.publicBaseUrl), this.clock.now());
  }

  @Post('runs/:runId/followups')
  @HttpCode(200)
  @RequireScope('runs:write')
  async followup(@Auth() auth: AuthContext, @Param('runId') runId: string, @Body() body: unknown) {
    const req = this.validate.body<{ message: string; mode?: string }>('RunFollowupRequest', body);
    await this.runs.followup(auth, runId, req.message, req.mode);
    return {};
  }

  /** 200 with the run id as a JSON string, as the Oz clients expect. */
  @Post('runs/:runId/cancel')
  @HttpCode(200)
  @Header('Content-Type', 'application/json; charset=utf-8')
  @RequireScope('runs:write')
  async cancel(@Auth() auth: AuthContext, @Param('runId') runId: string) {
    await this.runs.cancel(auth, runId);
    return JSON.stringify(runId);
  }
}
