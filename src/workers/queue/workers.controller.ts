import { SchemaBody } from '../../common/schema-body.js';
import type { WorkerFinishRequest } from '../../contract/generated.js';
import type { WorkerEventsRequest } from '../../contract/generated.js';
import type { WorkerLostRequest } from '../../contract/generated.js';
import type { WorkerHeartbeatRequest } from '../../contract/generated.js';
import type { WorkerClaimRequest } from '../../contract/generated.js';
import type { WorkerRequest } from '../../contract/generated.js';
import { Controller, Get, HttpCode, Inject, Param, Post, Req } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { FastifyRequest } from 'fastify';
import { ApiJsonOk, ApiProblems } from '../../common/openapi-decorators.js';
import type { AuthContext } from '../../auth/auth-context.js';
import { Auth, RequireScope } from '../../auth/auth.guard.js';
import { workerKeyCommand } from '../../auth/api-key.js';
import { InvalidRequest, NotAuthorized } from '../../common/problem.js';
import { RequestValidator } from '../../common/request-validation.js';
import { BodyLimit } from '../../common/route-config.js';
import { UUID_PATTERN } from '../../common/ids.js';
import { selfHostedHostProblem } from '../../common/worker-host.js';
import type { Outcome } from '../protocol/assignment.js';
import { parseHarnessLine, type HarnessEvent } from '../protocol/harness-protocol.js';
import { RunWakeups } from './run-wakeups.js';
import { WorkerRunsService, type WorkerIdentity } from './worker-runs.service.js';
import type { WorkerHarness } from './workers.repository.js';

const MAX_CLAIM = 16;
const MAX_WAIT_SECONDS = 25;
/** A report of harness events (up to 1,000, each text at most 64 KiB) or a run's end with its last events. */
const REPORT_BODY_LIMIT = 16 * 1024 * 1024;
/** The last lines of a failed harness's output that its status message may quote. */
const MAX_LAST_LINES = 20;

/** The bodies as their schemas (schemas/api/worker-*.schema.json) admit them. */
interface WorkerBody {
  worker_id: string;
  worker_host?: string;
  harnesses?: WorkerHarness[];
}
type ReportedEvent = Record<string, unknown> & { type: string };

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
    @Inject(RequestValidator) private readonly validate: RequestValidator,
  ) {}

  @Get('connected-self-hosted-workers')
  @ApiOperation({ summary: 'Self-hosted workers connected now (from heartbeats)' })
  @ApiJsonOk('ConnectedWorkersResponse')
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
  async connect(@Auth() auth: AuthContext, @SchemaBody('WorkerRequest') body: WorkerRequest) {
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
    @SchemaBody('WorkerClaimRequest') body: WorkerClaimRequest,
    @Req() req: FastifyRequest,
  ) {
    const w = identity(auth, body);
    const max = Math.min(body.max ?? 1, MAX_CLAIM);
    const wait = Math.min(body.wait_seconds ?? 0, MAX_WAIT_SECONDS);
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
  async heartbeat(
    @Auth() auth: AuthContext,
    @SchemaBody('WorkerHeartbeatRequest') body: WorkerHeartbeatRequest,
  ) {
    await this.service.heartbeat(identity(auth, body), body.run_ids ?? []);
    return {};
  }

  @Post('workers/lost')
  @ApiOperation({ summary: 'Self-hosted worker protocol (used by `factoryd worker --worker-host`)' })
  @ApiJsonOk({ type: 'object', properties: { lost_runs: { type: 'integer' } } })
  @HttpCode(200)
  @RequireScope('workers')
  async lost(@Auth() auth: AuthContext, @SchemaBody('WorkerLostRequest') body: WorkerLostRequest) {
    const w = identity(auth, body);
    const ids = body.worker_ids.map((i) => ownerId(auth, w.host, i));
    return { lost_runs: await this.service.lost(w, ids) };
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
    @SchemaBody('WorkerEventsRequest') body: WorkerEventsRequest,
  ) {
    await this.service.record(
      identity(auth, body),
      runParam(runId),
      body.execution,
      body.events.map(toEvent),
      body.started_ms_ago ?? undefined,
    );
    return {};
  }

  @Post('workers/runs/:runId/control')
  @ApiOperation({ summary: 'Self-hosted worker protocol (used by `factoryd worker --worker-host`)' })
  @ApiJsonOk({ type: 'object' })
  @HttpCode(200)
  @RequireScope('workers')
  control(
    @Auth() auth: AuthContext,
    @Param('runId') runId: string,
    @SchemaBody('WorkerRequest') body: WorkerRequest,
  ) {
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
    @SchemaBody('WorkerFinishRequest') body: WorkerFinishRequest,
  ) {
    const o = body.outcome ?? {};
    const result = o.result && toEvent(o.result);
    const outcome: Outcome = {
      stoppedBy: o.stoppedBy,
      exitCode: o.exitCode ?? null,
      signal: o.signal ?? null,
      lastLines: (o.lastLines ?? []).slice(-MAX_LAST_LINES),
      // A result event the harness protocol does not read as one (no status, …) is no result.
      result: result?.type === 'result' ? result : undefined,
      events: o.events?.map(toEvent),
      startedMsAgo: o.startedMsAgo ?? undefined,
      environmentFailure: o.environmentFailure?.slice(0, MAX_ENVIRONMENT_FAILURE),
      commits: o.commits,
    };
    await this.service.finish(identity(auth, body), runParam(runId), body.execution, outcome);
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
    const other = selfHostedHostProblem(body.worker_host) ? undefined : body.worker_host;
    throw new NotAuthorized(
      `This worker key is bound to worker_host "${host}" and cannot act for ${other ? `"${other}"` : 'another host'}. ` +
        `Start the worker with --worker-host ${host}, or issue a key for the other host: ` +
        `\`${workerKeyCommand(auth.team.name, other ?? 'ID')}\`.`,
    );
  }
  return {
    id: ownerId(auth, host, body.worker_id),
    host,
    teamId: auth.team.id,
    ...(body.harnesses ? { harnesses: body.harnesses } : {}),
  };
}

/** The longest environment failure message kept (a command and the tail of its output). */
const MAX_ENVIRONMENT_FAILURE = 8192;

const ownerId = (auth: AuthContext, host: string, workerId: string) => `${auth.team.uid}/${host}/${workerId}`;

function runParam(runId: string): string {
  if (!UUID_PATTERN.test(runId)) throw new InvalidRequest(`run id ${runId} is not a UUID`);
  return runId;
}

/** A reported event as the harness protocol reads it (texts cut to its limit); anything else is a transcript line. */
function toEvent(e: ReportedEvent): HarnessEvent {
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
