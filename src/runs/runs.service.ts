import { Inject, Injectable } from '@nestjs/common';
import type { AuthContext } from '../auth/auth-context.js';
import { AuthRepository } from '../auth/auth.repository.js';
import { Clock } from '../common/clock.js';
import { UUID_PATTERN } from '../common/ids.js';
import type { PageInfo } from '../common/pagination.js';
import { Conflict, InvalidRequest, NotFound } from '../common/problem.js';
import { RequestInvalid } from '../common/request-validation.js';
import { Database } from '../database/database.js';
import { RunListRepository, type RunListQuery } from './run-list.js';
import { isTerminal, type RunState } from './run-state.js';
import {
  checkMetadataValue,
  titleFromPrompt,
  withPrimarySkill,
  type AgentConfig,
  type NewAttachment,
  type NewRun,
  type Run,
} from './run.js';
import { TeamQueueCap } from './team-queue-cap.js';
import { RunsRepository } from './runs.repository.js';
import { RunsSignal } from './runs-signal.js';
import { NamedAgents, namedAgentMarks, withAgentDefaults } from './named-agents.js';

export interface RunCreateRequest {
  prompt?: string;
  title?: string;
  config?: AgentConfig;
  skill?: string;
  metadata?: Record<string, string>;
  /** `mime_type` is the Oz clients' name for `content_type`. */
  attachments?: Array<{ file_name: string; content_type?: string; mime_type?: string; data: string }>;
  images?: Array<{ data: string; mime_type: string }>;
  conversation_id?: string;
  parent_run_id?: string;
  mode?: string;
  agent_identity_uid?: string;
  on_behalf_of?: string;
  /** Accepted and ignored: every factoryd run takes follow-ups while it runs. */
  interactive?: boolean;
}

const MAX_ATTACHMENT_BYTES = 1024 * 1024;

@Injectable()
export class RunsService {
  constructor(
    @Inject(RunsRepository) private readonly runs: RunsRepository,
    @Inject(RunListRepository) private readonly runList: RunListRepository,
    @Inject(Database) private readonly db: Database,
    @Inject(Clock) private readonly clock: Clock,
    @Inject(RunsSignal) private readonly signal: RunsSignal,
    @Inject(NamedAgents) private readonly namedAgents: NamedAgents,
    @Inject(AuthRepository) private readonly authRepo: AuthRepository,
    @Inject(TeamQueueCap) private readonly queueCap: TeamQueueCap,
  ) {}

  /** POST /agent/runs: a QUEUED run owned by the caller's team. */
  async createFromApi(
    auth: AuthContext,
    req: RunCreateRequest,
    source: 'API' | 'CLI' = 'API',
  ): Promise<{ run_id: string; task_id: string; state: string }> {
    const teamId = auth.team.id;
    for (const [key, value] of Object.entries(req.metadata ?? {})) checkMetadataValue(key, value);
    let config: AgentConfig = { ...req.config };
    const agent = req.agent_identity_uid
      ? await this.namedAgents.defaults(teamId, req.agent_identity_uid)
      : undefined;
    if (req.agent_identity_uid && !agent)
      throw new NotFound(`agent ${req.agent_identity_uid} does not exist in this team`);
    if (agent) config = withAgentDefaults(config, agent.config);
    if (req.skill !== undefined) {
      if (config.skill_spec !== undefined && config.skill_spec !== req.skill) {
        throw new InvalidRequest('skill and config.skill_spec name different skills; give one');
      }
      config.skill_spec = req.skill;
    }
    config = withPrimarySkill(config);
    if (config.skill_spec !== undefined && config.name === undefined)
      config.name = skillName(config.skill_spec);
    if (req.conversation_id && !(await this.runs.conversationExists(teamId, req.conversation_id))) {
      throw new NotFound(`conversation ${req.conversation_id} does not exist in this team`);
    }
    if (req.parent_run_id && !(await this.runs.findForTeam(teamId, req.parent_run_id))) {
      throw new NotFound(`parent run ${req.parent_run_id} does not exist in this team`);
    }
    const prompt = req.prompt ?? '';
    if (
      !prompt &&
      !config.skill_spec &&
      !config.skills?.length &&
      !config.base_prompt &&
      !req.conversation_id
    )
      throw new RequestInvalid([
        { path: 'prompt', message: 'prompt is required: the run has no prompt, skill or base prompt' },
      ]);
    const creatorId = req.on_behalf_of ? await this.memberId(teamId, req.on_behalf_of) : auth.principal.id;
    const run: NewRun = {
      teamId,
      title: req.title ?? titleFromPrompt(prompt, config.name ?? 'Agent run'),
      prompt,
      source,
      creatorId,
      agentConfig: config,
      metadata: req.metadata,
      conversationId: req.conversation_id,
      parentRunId: req.parent_run_id,
      mode: req.mode,
      attachments: attachmentsOf(req),
      ...(agent && namedAgentMarks(req.metadata, agent)),
    };
    await this.queueCap.ensureRoom(teamId);
    const id = await this.runs.create(run, this.clock.now());
    return { run_id: id, task_id: id, state: 'QUEUED' };
  }

  /** `on_behalf_of`: a member of the team, by principal uid or display name (exactly one). */
  private async memberId(teamId: string, who: string): Promise<string> {
    const rows = await this.authRepo.membersNamed(teamId, who);
    if (rows.length !== 1)
      throw new RequestInvalid([
        {
          path: 'on_behalf_of',
          message: rows.length
            ? `on_behalf_of "${who}" names several members of this team; give a principal uid`
            : `on_behalf_of "${who}" is no member of this team (give a principal uid or display name)`,
        },
      ]);
    return rows[0]!.id;
  }

  /** One page of the team's runs: one statement, nothing else. */
  list(auth: AuthContext, query: RunListQuery): Promise<{ runs: Run[]; pageInfo: PageInfo }> {
    return this.runList.page(auth.team.id, query);
  }

  async get(auth: AuthContext, runId: string): Promise<Run> {
    const run = UUID_PATTERN.test(runId) ? await this.runs.findForTeam(auth.team.id, runId) : undefined;
    if (!run) throw new NotFound(`run ${runId} does not exist`);
    return run;
  }

  /**
   * A follow-up is stored, then routed by state: a queued or live run gets it as its next input; an
   * ended run continues in the same conversation (back to QUEUED). Answers as the clients'
   * RunSubmitFollowupResponse: the stored follow-up and how it travels.
   */
  async followup(
    auth: AuthContext,
    runId: string,
    message: string | undefined,
    mode?: string,
  ): Promise<{ followup_id: string | null; outcome: FollowupOutcome }> {
    const answer = await this.db.transaction(async (tx) => {
      const state = UUID_PATTERN.test(runId)
        ? await this.runs.lockForUpdate(tx, auth.team.id, runId)
        : undefined;
      if (!state) throw new NotFound(`run ${runId} does not exist`);
      if (isTerminal(state)) await this.runs.transition(tx, runId, state, 'continue', this.clock.now());
      // Without a message (the Oz clients make it optional) an ended run continues with no new input.
      const id = message !== undefined ? await this.runs.addFollowup(tx, runId, message, mode) : null;
      return { followup_id: id, outcome: followupOutcome(state) };
    });
    await this.signal.control(runId, 'followup');
    return answer;
  }

  /**
   * Stops the turn a live run is at; the run stays live (its harness answers BLOCKED and waits for a
   * follow-up). Only an INPROGRESS run has a turn to stop.
   */
  async interrupt(auth: AuthContext, runId: string): Promise<void> {
    await this.db.transaction(async (tx) => {
      const state = UUID_PATTERN.test(runId)
        ? await this.runs.lockForUpdate(tx, auth.team.id, runId)
        : undefined;
      if (!state) throw new NotFound(`run ${runId} does not exist`);
      if (isTerminal(state))
        throw new InvalidRequest(
          `run ${runId} has already ended (${state}); there is no turn to interrupt (send a follow-up to continue it)`,
        );
      if (state === 'PENDING' || state === 'CLAIMED')
        throw new Conflict(`run ${runId} is starting (${state}); retry the interrupt in a moment`, true);
      if (state === 'QUEUED')
        throw new Conflict(
          `run ${runId} has not started (QUEUED); there is no turn to interrupt (cancel it instead)`,
          false,
        );
      if (state === 'BLOCKED')
        throw new Conflict(`run ${runId} is not at work (BLOCKED): it waits for a follow-up`, false);
      await this.runs.requestInterrupt(tx, runId);
    });
    await this.signal.control(runId, 'interrupt');
  }

  async cancel(auth: AuthContext, runId: string): Promise<void> {
    await this.db.transaction(async (tx) => {
      const state = UUID_PATTERN.test(runId)
        ? await this.runs.lockForUpdate(tx, auth.team.id, runId)
        : undefined;
      if (!state) throw new NotFound(`run ${runId} does not exist`);
      if (isTerminal(state))
        throw new InvalidRequest(`run ${runId} has already ended (${state}); there is nothing to cancel`);
      if (state === 'PENDING')
        throw new Conflict(`run ${runId} is being prepared; retry the cancel in a moment`, true);
      await this.runs.transition(tx, runId, state, 'cancel', this.clock.now(), {
        statusMessage: { message: `Cancelled by ${auth.principal.displayName}` },
      });
    });
    await this.signal.control(runId, 'cancel');
  }
}

/**
 * How a follow-up reaches the agent, in the clients' words: an ended run continues in a new execution;
 * a running or blocked one has it delivered to its live harness; one that has not started gets it
 * once it does (factoryd never appends a follow-up to the prompt: `queued_prompt` does not occur).
 */
export type FollowupOutcome = 'live_session' | 'handoff_execution' | 'queue_pending';
function followupOutcome(state: RunState): FollowupOutcome {
  if (isTerminal(state)) return 'handoff_execution';
  return state === 'INPROGRESS' || state === 'BLOCKED' ? 'live_session' : 'queue_pending';
}

/** `owner/repo:name` → name; `owner/repo:path/to/name/SKILL.md` → name; `owner/repo:SKILL.md` → repo. */
export function skillName(spec: string): string {
  const [repoPart, path] = spec.split(':', 2);
  if (!path.endsWith('SKILL.md')) return path;
  const folders = path.split('/').slice(0, -1);
  return folders[folders.length - 1] ?? repoPart.split('/').pop()!;
}

function attachmentsOf(req: RunCreateRequest): NewAttachment[] {
  const out: NewAttachment[] = [];
  const decode = (data: string, field: string) => {
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(data)) {
      throw new RequestInvalid([{ path: field, message: `${field} must be base64` }]);
    }
    const content = Buffer.from(data, 'base64');
    if (content.length > MAX_ATTACHMENT_BYTES) {
      throw new RequestInvalid([{ path: field, message: `${field} must be at most 1 MiB decoded` }]);
    }
    return content;
  };
  req.attachments?.forEach((a, i) => {
    if (a.content_type !== undefined && a.mime_type !== undefined)
      throw new RequestInvalid([
        { path: `attachments.${i}`, message: `attachments.${i}: give content_type or mime_type, not both` },
      ]);
    out.push({
      fileName: a.file_name,
      contentType: a.content_type ?? a.mime_type ?? 'application/octet-stream',
      content: decode(a.data, `attachments.${i}.data`),
    });
  });
  req.images?.forEach((img, i) =>
    out.push({
      fileName: `image-${i + 1}.${img.mime_type.split('/')[1]}`,
      contentType: img.mime_type,
      content: decode(img.data, `images.${i}.data`),
    }),
  );
  const names = new Set<string>();
  for (const a of out) {
    if (names.has(a.fileName)) {
      throw new RequestInvalid([
        { path: 'attachments', message: `attachments: ${a.fileName} is given twice` },
      ]);
    }
    names.add(a.fileName);
  }
  return out;
}
