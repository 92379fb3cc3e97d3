import { Inject, Injectable } from '@nestjs/common';
import { Database, type Queryable } from '../database/database.js';
import type { StatementParams } from '../database/multi-row.js';
import type { AgentConfig } from '../runs/run.js';
import type { Profile, Schedule, ScheduleFields } from './schedule.js';

const COLUMNS = `s.id, s.team_id, t.uid AS team_uid, s.name, s.cron_schedule, s.prompt, s.agent_config, s.metadata,
  s.mode, s.agent_uid, s.enabled, s.next_fire_at, s.last_fired_at, s.last_run_id, s.last_spawn_error,
  s.trigger_index, s.created_at, s.updated_at, f.uid AS factory_uid, a.path AS automation_path,
  c.uid AS creator_uid, c.type AS creator_type, c.display_name AS creator_name,
  u.uid AS updater_uid, u.type AS updater_type, u.display_name AS updater_name`;

const FROM = `schedules s JOIN teams t ON t.id = s.team_id
  LEFT JOIN factories f ON f.id = s.factory_id LEFT JOIN automations a ON a.id = s.automation_id
  LEFT JOIN principals c ON c.id = s.creator_id LEFT JOIN principals u ON u.id = s.updated_by_id`;

const profile = (uid: string | null, type: Profile['type'] | null, name: string | null): Profile | null =>
  uid ? { uid, type: type!, displayName: name! } : null;

/** A schedule row's own columns: what the API and a factory's file set. */
interface FieldsRow {
  name: string;
  cron_schedule: string;
  prompt: string;
  agent_config: AgentConfig;
  metadata: Record<string, string> | null;
  mode: string | null;
  agent_uid: string | null;
  enabled: boolean;
}

/** A row of COLUMNS. */
interface ScheduleRow extends FieldsRow {
  id: string;
  team_id: string;
  team_uid: string;
  next_fire_at: Date | null;
  last_fired_at: Date | null;
  last_run_id: string | null;
  last_spawn_error: string | null;
  trigger_index: number | null;
  created_at: Date;
  updated_at: Date;
  factory_uid: string | null;
  automation_path: string | null;
  creator_uid: string | null;
  creator_type: Profile['type'] | null;
  creator_name: string | null;
  updater_uid: string | null;
  updater_type: Profile['type'] | null;
  updater_name: string | null;
}

function fieldsOf(r: FieldsRow): ScheduleFields {
  return {
    name: r.name,
    cronSchedule: r.cron_schedule,
    prompt: r.prompt,
    agentConfig: r.agent_config,
    metadata: r.metadata,
    mode: r.mode,
    agentUid: r.agent_uid,
    enabled: r.enabled,
  };
}

function toSchedule(r: ScheduleRow): Schedule {
  return {
    ...fieldsOf(r),
    id: r.id,
    teamId: r.team_id,
    teamUid: r.team_uid,
    nextFireAt: r.next_fire_at,
    lastFiredAt: r.last_fired_at,
    lastRunId: r.last_run_id,
    lastSpawnError: r.last_spawn_error,
    createdBy: profile(r.creator_uid, r.creator_type, r.creator_name),
    updatedBy: profile(r.updater_uid, r.updater_type, r.updater_name),
    // A factory's schedule is one of its automations' triggers: both are set (and checked to go together).
    factory: r.factory_uid
      ? { uid: r.factory_uid, automation: r.automation_path!, triggerIndex: r.trigger_index! }
      : null,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

/** A schedule due to fire, as the scheduler claims it. */
export interface DueSchedule extends ScheduleFields {
  id: string;
  teamId: string;
  creatorId: string | null;
  dueAt: Date;
  /** The owning automation's name, for a factory's schedule. */
  automation: string | null;
  /** The uid of the factory whose automation owns it. */
  factoryUid: string | null;
}

/** A factory's schedule as the reconciled trigger it stands for. */
export interface FactoryScheduleRow {
  id: string;
  automationId: string;
  triggerIndex: number;
  fields: ScheduleFields;
  nextFireAt: Date | null;
}

@Injectable()
export class SchedulesRepository {
  constructor(@Inject(Database) readonly db: Database) {}

  async find(teamId: string, id: string, q: Queryable = this.db): Promise<Schedule | undefined> {
    const rows = await q.query<ScheduleRow>(
      `SELECT ${COLUMNS} FROM ${FROM} WHERE s.id = $1 AND s.team_id = $2`,
      [id, teamId],
    );
    return rows[0] ? toSchedule(rows[0]) : undefined;
  }

  /** Locks the team's schedule `id` until the transaction ends (concurrent updates apply one after another). */
  async lock(tx: Queryable, teamId: string, id: string): Promise<boolean> {
    const rows = await tx.query(`SELECT 1 FROM schedules WHERE id = $1 AND team_id = $2 FOR UPDATE`, [
      id,
      teamId,
    ]);
    return rows.length > 0;
  }

  /** The team's schedules, by name (as the Oz clients document the list). */
  async list(teamId: string): Promise<Schedule[]> {
    const rows = await this.db.query<ScheduleRow>(
      `SELECT ${COLUMNS} FROM ${FROM} WHERE s.team_id = $1 ORDER BY s.name, s.id`,
      [teamId],
    );
    return rows.map(toSchedule);
  }

  /** How many schedules the API made for the team; serialised per team until the transaction ends. */
  async countMadeByApi(tx: Queryable, teamId: string): Promise<number> {
    await tx.query(`SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, [`factoryd:schedules:${teamId}`]);
    const [row] = await tx.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM schedules WHERE team_id = $1 AND automation_id IS NULL`,
      [teamId],
    );
    return row!.n;
  }

  async insert(
    q: Queryable,
    s: {
      id: string;
      teamId: string;
      fields: ScheduleFields;
      nextFireAt: Date | null;
      creatorId: string | null;
      owner?: { factoryId: string; automationId: string; triggerIndex: number };
    },
    now: Date,
  ): Promise<void> {
    const f = s.fields;
    await q.execute(
      `INSERT INTO schedules (id, team_id, name, cron_schedule, prompt, agent_config, metadata, mode, agent_uid, enabled,
                              next_fire_at, creator_id, updated_by_id, factory_id, automation_id, trigger_index,
                              created_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12, $13, $14, $15, $16, $16)`,
      [
        s.id,
        s.teamId,
        f.name,
        f.cronSchedule,
        f.prompt,
        f.agentConfig,
        f.metadata,
        f.mode,
        f.agentUid,
        f.enabled,
        s.nextFireAt,
        s.creatorId,
        s.owner?.factoryId ?? null,
        s.owner?.automationId ?? null,
        s.owner?.triggerIndex ?? null,
        now,
      ],
    );
  }

  async update(
    q: Queryable,
    id: string,
    f: ScheduleFields,
    nextFireAt: Date | null,
    updatedById: string | null,
    now: Date,
  ): Promise<void> {
    await q.execute(
      `UPDATE schedules SET name = $2, cron_schedule = $3, prompt = $4, agent_config = $5, metadata = $6, mode = $7,
              agent_uid = $8, enabled = $9, next_fire_at = $10, updated_by_id = coalesce($11, updated_by_id),
              updated_at = $12
        WHERE id = $1`,
      [
        id,
        f.name,
        f.cronSchedule,
        f.prompt,
        f.agentConfig,
        f.metadata,
        f.mode,
        f.agentUid,
        f.enabled,
        nextFireAt,
        updatedById,
        now,
      ],
    );
  }

  async delete(q: Queryable, ids: string[]): Promise<void> {
    if (ids.length) await q.execute(`DELETE FROM schedules WHERE id = ANY($1::uuid[])`, [ids]);
  }

  /** A factory's schedules, locked until the transaction ends. */
  async ofFactory(tx: Queryable, factoryId: string): Promise<FactoryScheduleRow[]> {
    const rows = await tx.query<
      FieldsRow & { id: string; automation_id: string; trigger_index: number; next_fire_at: Date | null }
    >(
      `SELECT id, automation_id, trigger_index, name, cron_schedule, prompt, agent_config, metadata, mode, agent_uid,
              enabled, next_fire_at
         FROM schedules WHERE factory_id = $1 FOR UPDATE`,
      [factoryId],
    );
    return rows.map((r) => ({
      id: r.id,
      automationId: r.automation_id,
      triggerIndex: r.trigger_index,
      nextFireAt: r.next_fire_at,
      fields: fieldsOf(r),
    }));
  }

  /** The ids of every factory that has schedules (to find the ones a removed trigger left behind). */
  async factoriesWithSchedules(): Promise<string[]> {
    const rows = await this.db.query<{ factory_id: string }>(
      `SELECT DISTINCT factory_id FROM schedules WHERE factory_id IS NOT NULL`,
    );
    return rows.map((r) => r.factory_id);
  }

  /**
   * Claims up to `limit` schedules due at `now`: their rows stay locked until the transaction ends,
   * and another replica's claim skips them (SKIP LOCKED) rather than waiting, then no longer sees them
   * due once this one has moved them on.
   */
  async claimDue(tx: Queryable, now: Date, limit: number): Promise<DueSchedule[]> {
    const rows = await tx.query<
      FieldsRow & {
        id: string;
        team_id: string;
        creator_id: string | null;
        next_fire_at: Date;
        automation: string | null;
        factory_uid: string | null;
      }
    >(
      `SELECT s.id, s.team_id, s.name, s.cron_schedule, s.prompt, s.agent_config, s.metadata, s.mode, s.creator_id,
              s.agent_uid, s.enabled, s.next_fire_at, a.name AS automation, f.uid AS factory_uid
         FROM schedules s LEFT JOIN automations a ON a.id = s.automation_id
         LEFT JOIN factories f ON f.id = a.factory_id
        WHERE s.next_fire_at <= $1
        ORDER BY s.next_fire_at
        LIMIT $2
          FOR UPDATE OF s SKIP LOCKED`,
      [now, limit],
    );
    return rows.map((r) => ({
      ...fieldsOf(r),
      id: r.id,
      teamId: r.team_id,
      creatorId: r.creator_id,
      dueAt: r.next_fire_at,
      automation: r.automation,
      factoryUid: r.factory_uid,
    }));
  }

  /**
   * Records firings in the statement that inserts their runs (`runCtes`, whose parameters are in
   * `params`): each schedule moves on to its next time, and remembers its run, when it started, and
   * no error.
   */
  async recordFired(
    tx: Queryable,
    params: StatementParams,
    runCtes: string,
    fired: Array<{ id: string; next: Date | null; runId: string }>,
    now: Date,
  ): Promise<void> {
    const source = params.rows(
      'u',
      { id: 'uuid', next: 'timestamptz', run_id: 'uuid' },
      fired.map((f) => ({ id: f.id, next: f.next, run_id: f.runId })),
    );
    const at = params.add(now);
    await tx.execute(
      `WITH ${runCtes}
       UPDATE schedules s SET next_fire_at = u.next, last_fired_at = ${at}, last_run_id = u.run_id, last_spawn_error = NULL
         FROM ${source} WHERE s.id = u.id`,
      params.values,
    );
  }

  /** A firing that could not start its run: the schedule moves on (no retry storm) and keeps the reason. */
  async recordSpawnError(q: Queryable, id: string, next: Date | null, error: string): Promise<void> {
    await q.execute(`UPDATE schedules SET next_fire_at = $2, last_spawn_error = $3 WHERE id = $1`, [
      id,
      next,
      error,
    ]);
  }
}
