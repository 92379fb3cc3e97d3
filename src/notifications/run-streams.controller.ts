import { Controller, Get, Inject, Param, Req, Res } from '@nestjs/common';
import { ApiBearerAuth, ApiHeader, ApiOperation, ApiParam, ApiResponse, ApiTags } from '@nestjs/swagger';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AuthContext } from '../auth/auth-context.js';
import { Auth, RequireScope } from '../auth/auth.guard.js';
import { QueryParams } from '../common/query-params.js';
import { ApiJsonOk, ApiProblems } from '../common/openapi-decorators.js';
import { parseRunStreamQuery } from './run-stream-filter.js';
import { RunStreamsService } from './run-streams.service.js';

const RUN_ID = ApiParam({ name: 'runId', description: 'The run id (a UUID)', schema: { type: 'string' } });

const LAST_EVENT_ID = ApiHeader({
  name: 'Last-Event-ID',
  required: false,
  description: 'The id of the last event received: the stream resumes after it, losing nothing',
});

const EVENT_STREAM = (description: string) =>
  ApiResponse({ status: 200, description, content: { 'text/event-stream': { schema: { type: 'string' } } } });

const TIMELINE_ENTRY = {
  type: 'object',
  required: ['type', 'at'],
  properties: {
    type: { enum: ['state', 'followup'] },
    at: { type: 'string', format: 'date-time' },
    event: {
      enum: [
        'queued',
        'claimed',
        'started',
        'blocked',
        'resumed',
        'ended',
        'cancelled',
        'continued',
        'pending',
      ],
      description: 'A state change: what entering the state means in the run’s life',
    },
    state: { $ref: '#/components/schemas/RunState' },
    previous_state: { oneOf: [{ $ref: '#/components/schemas/RunState' }, { type: 'null' }] },
    execution: { type: 'integer' },
    worker_id: { type: 'string', description: 'The worker holding the run (claimed, started, blocked)' },
    status_message: { type: 'object', description: 'Why (an end’s reason, a blocked run’s question)' },
    message: { type: 'string', description: 'A follow-up’s text' },
    mode: { type: 'string' },
    delivered_at: {
      type: 'string',
      format: 'date-time',
      description: 'When the follow-up reached the agent',
    },
  },
};

/** The clients' RunGetTimelineResponse event. */
const TIMELINE_EVENT = {
  type: 'object',
  required: ['event_uuid', 'event_type', 'occurred_at', 'run_id'],
  properties: {
    event_uuid: { type: 'string', format: 'uuid', description: 'Stable: the same state change, the same id' },
    event_type: {
      enum: [
        'oz_run_created',
        'oz_run_claimed',
        'agent_started',
        'oz_run_blocked',
        'oz_run_cancelled',
        'oz_run_done',
        'oz_run_failed',
        'oz_run_errored',
      ],
    },
    occurred_at: { type: 'string', format: 'date-time' },
    run_id: { type: 'string', format: 'uuid' },
    execution_id: { type: 'integer', description: 'The execution (1, 2, … as follow-ups continue the run)' },
    payload: {
      type: 'object',
      description: 'factoryd’s details: state, previous_state, worker_id, status_message',
    },
  },
};

/** The run timeline and the live streams (docs/run-api.md "Timeline" and "Live streams"). */
@ApiTags('Runs')
@ApiBearerAuth()
@Controller('api/v1/agent')
export class RunStreamsController {
  constructor(@Inject(RunStreamsService) private readonly streams: RunStreamsService) {}

  @Get('runs/events')
  @ApiOperation({
    summary: 'Live stream of the team’s run state changes (Server-Sent Events), filtered like the run list',
  })
  @LAST_EVENT_ID
  @EVENT_STREAM('`run.state` events; `id` is the state change id')
  @ApiProblems(403)
  @RequireScope('runs:read')
  async teamStream(@Auth() auth: AuthContext, @Req() req: FastifyRequest, @Res() reply: FastifyReply) {
    const filter = parseRunStreamQuery(QueryParams.of(req));
    const after = this.streams.checkTeam(lastEventId(req));
    reply.hijack();
    await this.streams.streamTeam(auth, filter, after, reply.raw).catch(() => reply.raw.destroy());
  }

  @Get('runs/:runId/timeline')
  @ApiOperation({
    summary:
      'Every lifecycle event of a run, oldest first: as the Oz clients’ `events`, and factoryd’s `timeline`',
  })
  @RUN_ID
  @ApiJsonOk({
    type: 'object',
    required: ['run_id', 'events', 'timeline'],
    properties: {
      run_id: { type: 'string' },
      events: { type: 'array', items: TIMELINE_EVENT },
      timeline: { type: 'array', items: TIMELINE_ENTRY },
    },
  })
  @ApiProblems(403, 404)
  @RequireScope('runs:read')
  async timeline(@Auth() auth: AuthContext, @Param('runId') runId: string) {
    return { run_id: runId, ...(await this.streams.timeline(auth, runId)) };
  }

  @Get('runs/:runId/events')
  @ApiOperation({
    summary: 'Live stream of one run: state changes and conversation events (Server-Sent Events)',
  })
  @RUN_ID
  @LAST_EVENT_ID
  @EVENT_STREAM(
    '`run.state` and `run.conversation` events; `id` is `<state change id>-<conversation event id>`',
  )
  @ApiProblems(403, 404)
  @RequireScope('runs:read')
  async runStream(
    @Auth() auth: AuthContext,
    @Param('runId') runId: string,
    @Req() req: FastifyRequest,
    @Res() reply: FastifyReply,
  ) {
    const after = await this.streams.checkRun(auth, runId, lastEventId(req));
    reply.hijack();
    await this.streams.streamRun(auth, runId, after, reply.raw).catch(() => reply.raw.destroy());
  }
}

function lastEventId(req: FastifyRequest): string | undefined {
  const v = req.headers['last-event-id'];
  return Array.isArray(v) ? v[0] : v;
}
