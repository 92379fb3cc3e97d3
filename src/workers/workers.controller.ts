import { Body, Controller, Get, HttpCode, Inject, Param, Post, Req } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { FastifyRequest } from 'fastify';
import { ApiJsonOk, ApiProblems } from '../common/openapi-decorators.js';
import type { AuthContext } from '../auth/auth-context.js';
import { Auth, RequireScope } from '../auth/auth.guard.js';
import { workerKeyCommand } from '../auth/api-key.js';
import { InvalidRequest, NotAuthorized } from '../common/problem.js';
import { BodyLimit } from '../common/route-config.js';
import { UUID_PATTERN } from '../common/ids.js';
import { selfHostedHostProblem } from '../common/worker-host.js';
import type { Outcome } from './assignment.js';
import { parseHarnessLine, type HarnessEvent } from './harness-protocol.js';
import { RunWakeups } from './run-wakeups.js';
import { WorkerRunsService, type WorkerIdentity } from './worker-runs.service.js';

const WORKER_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const MAX_WAIT_SECONDS = 25;
/** A report of harness events (up to 1,000, each text at most 64 KiB) or a run's end with its last events. */
const REPORT_BODY_LIMIT = 16 * 1024 * 1024;

interface WorkerBody {
  worker_id?: unknown;
  worker_host?: unknown;
}

/**
 * The self-hosted worker API: a worker connects out, long-polls for runs of its host (in its API
 * key's team), streams events back, and learns of follow-ups and cancels when it asks. Every route
 * takes only a worker key (scope `workers`) and acts only for the worker_host the key is bound to.
 */
@Controller('api/v1/agent')
@ApiTags('Runs')
@ApiBearerAuth()
@ApiProblems(403, 404)
export class WorkersController {
  constructor(
    @Inject(WorkerRunsService) private readonly service: WorkerRunsService,
    @Inject(RunWakeups) private readonly wakeups: RunWakeups,
  ) {}

  @Get('connected-self-hosted-workers')
  @ApiOperation({ summary: 'Self-hosted workers connected now (from heartbeats)' })
  @ApiJsonOk({
    type: 'object',
    required: ['workers'],
    properties: {
      workers: {
        type: 'array',
        items: {
          type: 'object',
          properties: {
            worker_host: { type: 'string' },
            connection_count: { type: 'integer' },
            connected_at: { type: 'string', format: 'date-time' },
            last_seen_at: { type: 'string', format: 'date-time' },
          },
        },
      },
    },
  })
  @RequireScope('runs:read')
  async connected(@Auth() auth: AuthContext) {
    return { workers: await this.service.connectedSelfHosted(auth.team.id) };
  }

  @Post('workers/connect')
  @ApiOperation({
    summary:
      'Self-hosted worker protocol: who this worker key serves (checked when `factoryd worker` starts)',
  })
  @ApiJsonOk({
    type: 'object',
    required: ['worker_host', 'team'],
    properties: {
      worker_host: { type: 'string' },
      team: { type: 'object', properties: { uid: { type: 'string' }, name: { type: 'string' } } },
    },
  })
  @HttpCode(200)
  @RequireScope('workers')
  async connect(@Auth() auth: AuthContext, @Body() body: WorkerBody) {
    const w = identity(auth, body);
    await this.service.register(w);
    return { worker_host: w.host, team: { uid: auth.team.uid, name: auth.team.name } };
  }

  @Post('workers/claim')
  @ApiOperation({ summary: 'Self-hosted worker protocol (used by `factoryd worker --worker-host`)' })
  @ApiJsonOk({ type: 'object' })
  @HttpCode(200)
  @RequireScope('workers')
  async claim(
    @Auth() auth: AuthContext,
    @Body() body: WorkerBody & { max?: unknown; wait_seconds?: unknown },
    @Req() req: FastifyRequest,
  ) {
    const w = identity(auth, body);
    const max =
      typeof body.max === 'number' && Number.isInteger(body.max) ? Math.min(Math.max(body.max, 1), 16) : 1;
    const wait =
      typeof body.wait_seconds === 'number' ? Math.min(Math.max(body.wait_seconds, 0), MAX_WAIT_SECONDS) : 0;
    const deadline = Date.now() + wait * 1000;
    for (;;) {
      // A worker that hung up (stopped, restarted) must not be handed runs it will never see.
      if (req.raw.socket?.destroyed) return { runs: [] };
      // Taken before the claim: a run queued while the claim runs wakes the wait below at once.
      const seen = this.wakeups.generation;
      await this.service.register(w);
      const runs = await this.service.claim(w, max);
      const left = deadline - Date.now();
      if (runs.length || left <= 0 || this.wakeups.closed) return { runs };
      await this.wakeups.next(Math.min(left, 2000), seen);
    }
  }

  @Post('workers/heartbeat')
  @ApiOperation({ summary: 'Self-hosted worker protocol (used by `factoryd worker --worker-host`)' })
  @ApiJsonOk({ type: 'object' })
  @HttpCode(200)
  @RequireScope('workers')
  async heartbeat(@Auth() auth: AuthContext, @Body() body: WorkerBody & { run_ids?: unknown }) {
    const ids = Array.isArray(body.run_ids)
      ? body.run_ids.filter((i): i is string => typeof i === 'string' && UUID_PATTERN.test(i))
      : [];
    await this.service.heartbeat(identity(auth, body), ids);
    return {};
  }

  @Post('workers/lost')
  @ApiOperation({ summary: 'Self-hosted worker protocol (used by `factoryd worker --worker-host`)' })
  @ApiJsonOk({ type: 'object', properties: { lost_runs: { type: 'integer' } } })
  @HttpCode(200)
  @RequireScope('workers')
  async lost(@Auth() auth: AuthContext, @Body() body: WorkerBody & { worker_ids?: unknown }) {
    const ids = body.worker_ids;
    if (
      !Array.isArray(ids) ||
      ids.length > 100 ||
      !ids.every((i) => typeof i === 'string' && WORKER_ID.test(i))
    )
      throw new InvalidRequest(
        'worker_ids must be an array of at most 100 worker ids, each 1-128 characters of [A-Za-z0-9._:-]',
      );
    const w = identity(auth, body);
    return {
      lost_runs: await this.service.lost(
        w,
        ids.map((i: string) => ownerId(auth, w.host, i)),
      ),
    };
  }

  @Post('workers/runs/:runId/events')
  @ApiOperation({ summary: 'Self-hosted worker protocol (used by `factoryd worker --worker-host`)' })
  @ApiJsonOk({ type: 'object' })
  @HttpCode(200)
  @RequireScope('workers')
  @BodyLimit(REPORT_BODY_LIMIT)
  async events(
    @Auth() auth: AuthContext,
    @Param('runId') runId: string,
    @Body() body: WorkerBody & { execution?: unknown; events?: unknown; started_ms_ago?: unknown },
  ) {
    await this.service.record(
      identity(auth, body),
      runParam(runId),
      execution(body),
      events(body.events, 'events'),
      startedMsAgo(body.started_ms_ago, 'started_ms_ago'),
    );
    return {};
  }

  @Post('workers/runs/:runId/control')
  @ApiOperation({ summary: 'Self-hosted worker protocol (used by `factoryd worker --worker-host`)' })
  @ApiJsonOk({ type: 'object' })
  @HttpCode(200)
  @RequireScope('workers')
  control(@Auth() auth: AuthContext, @Param('runId') runId: string, @Body() body: WorkerBody) {
    return this.service.control(identity(auth, body), runParam(runId));
  }

  @Post('workers/runs/:runId/finish')
  @ApiOperation({ summary: 'Self-hosted worker protocol (used by `factoryd worker --worker-host`)' })
  @ApiJsonOk({ type: 'object' })
  @HttpCode(200)
  @RequireScope('workers')
  @BodyLimit(REPORT_BODY_LIMIT)
  async finish(
    @Auth() auth: AuthContext,
    @Param('runId') runId: string,
    @Body() body: WorkerBody & { execution?: unknown; outcome?: Partial<Outcome> },
  ) {
    const o = body.outcome ?? {};
    const outcome: Outcome = {
      stoppedBy:
        o.stoppedBy === 'cancel' ||
        o.stoppedBy === 'idle' ||
        o.stoppedBy === 'max_duration' ||
        o.stoppedBy === 'shutdown'
          ? o.stoppedBy
          : undefined,
      exitCode: typeof o.exitCode === 'number' ? o.exitCode : null,
      signal: typeof o.signal === 'string' ? o.signal : null,
      lastLines: Array.isArray(o.lastLines)
        ? o.lastLines.filter((l) => typeof l === 'string').slice(-20)
        : [],
      result: o.result ? (toEvent(o.result) as Outcome['result']) : undefined,
      events: o.events === undefined ? undefined : events(o.events, 'outcome.events'),
      startedMsAgo: startedMsAgo(o.startedMsAgo, 'outcome.startedMsAgo'),
    };
    if (outcome.result && outcome.result.type !== 'result') outcome.result = undefined;
    await this.service.finish(identity(auth, body), runParam(runId), execution(body), outcome);
    return {};
  }
}

/**
 * The worker the key speaks for: its host is the key's (a body's `worker_host`, optional, must name
 * it). Worker ids are namespaced by team and host, so a key reaches no run another team's or another
 * host's worker holds, whatever worker id it sends.
 */
function identity(auth: AuthContext, body: WorkerBody): WorkerIdentity {
  const host = auth.workerHost;
  // The guard admits only keys with the workers scope, and those always have a host (api_keys check).
  if (!host) throw new NotAuthorized('This API key is not a worker key (it is bound to no worker_host).');
  if (body.worker_host !== undefined && body.worker_host !== host) {
    const other = selfHostedHostProblem(body.worker_host) ? undefined : (body.worker_host as string);
    throw new NotAuthorized(
      `This worker key is bound to worker_host "${host}" and cannot act for ${other ? `"${other}"` : 'another host'}. ` +
        `Start the worker with --worker-host ${host}, or issue a key for the other host: ` +
        `\`${workerKeyCommand(auth.team.name, other ?? 'ID')}\`.`,
    );
  }
  if (typeof body.worker_id !== 'string' || !WORKER_ID.test(body.worker_id))
    throw new InvalidRequest('worker_id must be 1-128 characters of [A-Za-z0-9._:-]');
  return { id: ownerId(auth, host, body.worker_id), host, teamId: auth.team.id };
}

const ownerId = (auth: AuthContext, host: string, workerId: string) => `${auth.team.uid}/${host}/${workerId}`;

function runParam(runId: string): string {
  if (!UUID_PATTERN.test(runId)) throw new InvalidRequest(`run id ${runId} is not a UUID`);
  return runId;
}

function execution(body: { execution?: unknown }): number {
  if (typeof body.execution !== 'number' || !Number.isInteger(body.execution) || body.execution < 1)
    throw new InvalidRequest('execution must be the positive integer given with the claimed run');
  return body.execution;
}

function events(value: unknown, name: string): HarnessEvent[] {
  if (!Array.isArray(value) || value.length > 1000)
    throw new InvalidRequest(`${name} must be an array of at most 1000 harness events`);
  return value.map(toEvent);
}

/** Optional: how long ago the harness started, in whole milliseconds (the start's first report). */
function startedMsAgo(value: unknown, name: string): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0)
    throw new InvalidRequest(`${name} must be a non-negative integer (milliseconds)`);
  return value;
}

function toEvent(e: unknown): HarnessEvent {
  if (e && typeof e === 'object' && (e as { type?: unknown }).type === 'transcript') {
    const t = e as { stream?: unknown; text?: unknown };
    return {
      type: 'transcript',
      stream: t.stream === 'stderr' ? 'stderr' : 'stdout',
      text: String(t.text ?? '').slice(0, 65536),
    };
  }
  return parseHarnessLine(JSON.stringify(e));
}
