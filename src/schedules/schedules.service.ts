import { Inject, Injectable } from '@nestjs/common';
import type { AuthContext } from '../auth/auth-context.js';
import { Clock } from '../common/clock.js';
import { newUuid, UUID_PATTERN } from '../common/ids.js';
import { Conflict, invalidParam, NotFound } from '../common/problem.js';
import type { Queryable } from '../database/database.js';
import { parseCron, type CronSchedule } from '../definitions/cron.js';
import { NamedAgents } from '../runs/named-agents.js';
import { checkMetadataValue, type AgentConfig } from '../runs/run.js';
import { McpCredentials } from '../secrets/mcp-credentials.js';
import { sealIdOf, type Schedule, type ScheduleFields } from './schedule.js';
import { SchedulesRepository } from './schedules.repository.js';

/** ScheduleCreateParams of the Oz clients. */
export interface ScheduleCreateRequest {
  cron_schedule: string;
  name: string;
  prompt?: string;
  enabled?: boolean;
  agent_config?: AgentConfig;
  agent_uid?: string;
  metadata?: Record<string, string>;
  mode?: string;
  team?: boolean;
}

/** ScheduleUpdateParams: cron_schedule, enabled and name required; an optional field left out keeps its value. */
export type ScheduleUpdateRequest = Omit<ScheduleCreateRequest, 'enabled' | 'team'> & { enabled: boolean };

/** Schedules the API may make per team (a factory's are bounded by its definition's limits). */
const MAX_SCHEDULES_PER_TEAM = 1000;

/** The schedules API: a team's schedules, each changed under its row lock. */
@Injectable()
export class SchedulesService {
  constructor(
    @Inject(SchedulesRepository) private readonly schedules: SchedulesRepository,
    @Inject(McpCredentials) private readonly credentials: McpCredentials,
    @Inject(Clock) private readonly clock: Clock,
    @Inject(NamedAgents) private readonly namedAgents: NamedAgents,
  ) {}

  async create(auth: AuthContext, req: ScheduleCreateRequest): Promise<Schedule> {
    const cron = cronOf(req.cron_schedule);
    await this.checkAgent(auth, req.agent_uid);
    const fields: ScheduleFields = {
      name: req.name,
      cronSchedule: req.cron_schedule.trim(),
      prompt: req.prompt ?? '',
      agentConfig: req.agent_config ?? {},
      metadata: req.metadata ?? null,
      mode: req.mode ?? null,
      agentUid: req.agent_uid ?? null,
      enabled: req.enabled ?? true,
    };
    checkFields(fields);
    const id = newUuid();
    const now = this.clock.now();
    await this.schedules.db.transaction(async (tx) => {
      if ((await this.schedules.countMadeByApi(tx, auth.team.id)) >= MAX_SCHEDULES_PER_TEAM)
        throw new Conflict(
          `this team already has ${MAX_SCHEDULES_PER_TEAM} schedules, the most it may have: delete one first`,
        );
      await this.schedules.insert(
        tx,
        {
          id,
          teamId: auth.team.id,
          fields: this.sealed(fields, id),
          nextFireAt: fields.enabled ? cron.next(now) : null,
          creatorId: auth.principal.id,
        },
        now,
      );
    });
    return this.get(auth, id);
  }

  async list(auth: AuthContext): Promise<Schedule[]> {
    return this.schedules.list(auth.team.id);
  }

  async get(auth: AuthContext, id: string): Promise<Schedule> {
    const s = UUID_PATTERN.test(id) ? await this.schedules.find(auth.team.id, id) : undefined;
    if (!s) throw new NotFound(`schedule ${id} does not exist`);
    return s;
  }

  async update(auth: AuthContext, id: string, req: ScheduleUpdateRequest): Promise<Schedule> {
    const cron = cronOf(req.cron_schedule);
    await this.checkAgent(auth, req.agent_uid);
    return this.change(auth, id, (current) => ({
      fields: {
        name: req.name,
        cronSchedule: req.cron_schedule.trim(),
        prompt: req.prompt ?? current.prompt,
        agentConfig: req.agent_config ?? this.credentials.open(current.agentConfig, sealIdOf(id)),
        metadata: req.metadata ?? current.metadata,
        mode: req.mode ?? current.mode,
        agentUid: req.agent_uid ?? current.agentUid,
        enabled: req.enabled,
      },
      cron,
    }));
  }

  async setEnabled(auth: AuthContext, id: string, enabled: boolean): Promise<Schedule> {
    return this.change(auth, id, (current) => ({
      fields: {
        ...current,
        agentConfig: this.credentials.open(current.agentConfig, sealIdOf(id)),
        enabled,
      },
      cron: cronOf(current.cronSchedule),
    }));
  }

  async delete(auth: AuthContext, id: string): Promise<void> {
    await this.schedules.db.transaction(async (tx) => {
      this.refuseFactoryOwned(await this.locked(tx, auth, id));
      await this.schedules.delete(tx, [id]);
    });
  }

  /**
   * Changes a schedule under its row lock (a firing in progress commits first). Its next time is
   * counted from now when the cron changed or it is enabled again: a paused schedule does not make up
   * for the times it was paused. Otherwise it keeps its next time.
   */
  private async change(
    auth: AuthContext,
    id: string,
    next: (current: Schedule) => { fields: ScheduleFields; cron: CronSchedule },
  ): Promise<Schedule> {
    await this.schedules.db.transaction(async (tx) => {
      const current = await this.locked(tx, auth, id);
      this.refuseFactoryOwned(current);
      const { fields, cron } = next(current);
      checkFields(fields);
      const now = this.clock.now();
      const recount = fields.cronSchedule !== current.cronSchedule || (fields.enabled && !current.enabled);
      const nextFireAt = !fields.enabled ? null : recount ? cron.next(now) : current.nextFireAt;
      await this.schedules.update(tx, id, this.sealed(fields, id), nextFireAt, auth.principal.id, now);
    });
    return this.get(auth, id);
  }

  /** The team's schedule `id`, locked until the transaction ends; 404 when the team has none such. */
  private async locked(tx: Queryable, auth: AuthContext, id: string): Promise<Schedule> {
    const found = UUID_PATTERN.test(id) && (await this.schedules.lock(tx, auth.team.id, id));
    const current = found ? await this.schedules.find(auth.team.id, id, tx) : undefined;
    if (!current) throw new NotFound(`schedule ${id} does not exist`);
    return current;
  }

  /** The factory file is the schedule's one source of truth: a change made here would be undone by the next apply. */
  private refuseFactoryOwned(s: Schedule): void {
    if (!s.factory) return;
    throw new Conflict(
      `schedule ${s.id} is trigger ${s.factory.triggerIndex} of ${s.factory.automation} in factory ${s.factory.uid}: ` +
        'change it in that file (`enabled: false` pauses it; removing the trigger deletes it)',
    );
  }

  /** `agent_uid` names one of the team's agents, as a run's `agent_identity_uid` must (same 404). */
  private async checkAgent(auth: AuthContext, uid: string | undefined): Promise<void> {
    if (uid !== undefined && !(await this.namedAgents.defaults(auth.team.id, uid)))
      throw new NotFound(`agent ${uid} does not exist in this team`);
  }

  private sealed(fields: ScheduleFields, id: string): ScheduleFields {
    return { ...fields, agentConfig: this.credentials.seal(fields.agentConfig, sealIdOf(id)) };
  }
}

/** The parsed cron, or a 400 naming `cron_schedule` and why it is wrong. */
function cronOf(expression: string): CronSchedule {
  const parsed = parseCron(expression);
  if ('error' in parsed) throw invalidParam('cron_schedule', `cron_schedule: ${parsed.error}`);
  return parsed.schedule;
}

/** What the schema cannot say: a prompt or a skill, values in bytes, the reserved metadata key. */
function checkFields(f: ScheduleFields): void {
  if (!f.prompt.trim() && f.agentConfig.skill_spec === undefined && !f.agentConfig.skills?.length)
    throw invalidParam(
      'prompt',
      'prompt is required unless agent_config.skill_spec or agent_config.skills is given',
    );
  for (const [key, value] of Object.entries(f.metadata ?? {})) {
    if (key === 'schedule_id')
      throw invalidParam(
        'metadata.schedule_id',
        'metadata.schedule_id is set by factoryd on every run a schedule starts',
      );
    checkMetadataValue(key, value);
  }
}
