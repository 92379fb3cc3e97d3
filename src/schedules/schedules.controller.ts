import { SchemaBody } from '../common/schema-body.js';
import { Controller, Delete, Get, HttpCode, Inject, Param, Post, Put } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiParam, ApiTags } from '@nestjs/swagger';
import type { AuthContext } from '../auth/auth-context.js';
import { Auth, RequireScope } from '../auth/auth.guard.js';
import { ApiJsonOk, ApiProblems } from '../common/openapi-decorators.js';
import { BodyLimit, PROMPT_BODY_LIMIT } from '../common/route-config.js';
import { RequestValidator } from '../common/request-validation.js';
import { presentSchedule } from './schedule.presenter.js';
import {
  SchedulesService,
  type ScheduleCreateRequest,
  type ScheduleUpdateRequest,
} from './schedules.service.js';

const SCHEDULE_ID = ApiParam({
  name: 'scheduleId',
  description: 'The schedule id (a UUID)',
  schema: { type: 'string' },
});

/** /agent/schedules as the Oz clients call it (client.agent.schedules.*): docs/schedules.md. */
@ApiTags('Runs')
@ApiBearerAuth()
@Controller('api/v1/agent/schedules')
export class SchedulesController {
  constructor(
    @Inject(SchedulesService) private readonly schedules: SchedulesService,
    @Inject(RequestValidator) private readonly validate: RequestValidator,
  ) {}

  @Post()
  @HttpCode(200)
  @ApiOperation({ summary: 'Create a scheduled agent: a run starts at every time its cron (UTC) names' })
  @ApiJsonOk('ScheduledAgentItem')
  @ApiProblems(403, 409)
  @RequireScope('runs:write')
  @BodyLimit(PROMPT_BODY_LIMIT)
  async create(@Auth() auth: AuthContext, @SchemaBody('ScheduleCreateRequest') body: ScheduleCreateRequest) {
    const req = body;
    return presentSchedule(await this.schedules.create(auth, req));
  }

  @Get()
  @ApiOperation({ summary: 'The team’s scheduled agents, by name' })
  @ApiJsonOk('ScheduleListResponse')
  @ApiProblems(403)
  @RequireScope('runs:read')
  async list(@Auth() auth: AuthContext) {
    return { schedules: (await this.schedules.list(auth)).map(presentSchedule) };
  }

  @Get(':scheduleId')
  @ApiOperation({ summary: 'One scheduled agent, with its history and next run time' })
  @SCHEDULE_ID
  @ApiJsonOk('ScheduledAgentItem')
  @ApiProblems(403, 404)
  @RequireScope('runs:read')
  async get(@Auth() auth: AuthContext, @Param('scheduleId') id: string) {
    return presentSchedule(await this.schedules.get(auth, id));
  }

  @Put(':scheduleId')
  @ApiOperation({
    summary:
      'Update a scheduled agent; cron_schedule, enabled and name are required, optional fields left out are kept',
  })
  @SCHEDULE_ID
  @ApiJsonOk('ScheduledAgentItem')
  @ApiProblems(403, 404, 409)
  @RequireScope('runs:write')
  @BodyLimit(PROMPT_BODY_LIMIT)
  async update(
    @Auth() auth: AuthContext,
    @Param('scheduleId') id: string,
    @SchemaBody('ScheduleUpdateRequest') body: ScheduleUpdateRequest,
  ) {
    const req = body;
    return presentSchedule(await this.schedules.update(auth, id, req));
  }

  @Delete(':scheduleId')
  @ApiOperation({ summary: 'Delete a scheduled agent; runs it started stay' })
  @SCHEDULE_ID
  @ApiJsonOk('ScheduleDeleteResponse')
  @ApiProblems(403, 404, 409)
  @RequireScope('runs:write')
  async delete(@Auth() auth: AuthContext, @Param('scheduleId') id: string) {
    await this.schedules.delete(auth, id);
    return { success: true };
  }

  @Post(':scheduleId/pause')
  @HttpCode(200)
  @ApiOperation({ summary: 'Pause a scheduled agent: it starts no run until resumed' })
  @SCHEDULE_ID
  @ApiJsonOk('ScheduledAgentItem')
  @ApiProblems(403, 404, 409)
  @RequireScope('runs:write')
  async pause(@Auth() auth: AuthContext, @Param('scheduleId') id: string) {
    return presentSchedule(await this.schedules.setEnabled(auth, id, false));
  }

  @Post(':scheduleId/resume')
  @HttpCode(200)
  @ApiOperation({
    summary: 'Resume a paused scheduled agent: its next run is the next time its cron names from now',
  })
  @SCHEDULE_ID
  @ApiJsonOk('ScheduledAgentItem')
  @ApiProblems(403, 404, 409)
  @RequireScope('runs:write')
  async resume(@Auth() auth: AuthContext, @Param('scheduleId') id: string) {
    return presentSchedule(await this.schedules.setEnabled(auth, id, true));
  }
}
