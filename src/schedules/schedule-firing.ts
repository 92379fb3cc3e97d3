import { Inject, Injectable } from '@nestjs/common';
import { isDatabaseUnreachable } from '../common/problem.js';
import { StatementParams } from '../database/multi-row.js';
import { parseCron } from '../definitions/cron.js';
import { NamedAgents, namedAgentMarks, withAgentDefaults } from '../runs/named-agents.js';
import { withPrimarySkill, type NewRun } from '../runs/run.js';
import { RunsRepository } from '../runs/runs.repository.js';
import { skillName } from '../runs/runs.service.js';
import { McpCredentials } from '../secrets/mcp-credentials.js';
import { sealIdOf } from './schedule.js';
import { SchedulesRepository, type DueSchedule } from './schedules.repository.js';

/** Schedules one transaction claims and fires: one statement inserts their runs. */
const FIRING_BATCH = 500;

/**
 * Fires the schedules due at a given time, each exactly once whatever the number of replicas doing the
 * same: a batch is claimed (FOR UPDATE SKIP LOCKED), its runs are inserted and every schedule is moved
 * to its next time in one statement of the same transaction. A crash before COMMIT leaves the schedules
 * due and no run; after it, both are there. A schedule missed for a while (every replica down) fires
 * once, late, and its next time is counted from now: no burst of the firings missed.
 */
@Injectable()
export class ScheduleFiring {
  constructor(
    @Inject(SchedulesRepository) private readonly schedules: SchedulesRepository,
    @Inject(RunsRepository) private readonly runs: RunsRepository,
    @Inject(McpCredentials) private readonly credentials: McpCredentials,
    @Inject(NamedAgents) private readonly namedAgents: NamedAgents,
  ) {}

  /** Fires what is due at `now`, batch after batch; the number of runs this replica started. */
  async fireDue(now: Date, batch = FIRING_BATCH): Promise<number> {
    let started = 0;
    for (;;) {
      const { claimed, fired } = await this.fireBatch(now, batch);
      started += fired;
      if (claimed < batch) return started;
    }
  }

  private async fireBatch(now: Date, limit: number): Promise<{ claimed: number; fired: number }> {
    try {
      return await this.schedules.db.transaction(async (tx) => {
        const due = await this.schedules.claimDue(tx, now, limit);
        if (!due.length) return { claimed: 0, fired: 0 };
        const params = new StatementParams();
        const part = this.runs.insertManyPart(params, await Promise.all(due.map((s) => this.runFor(s))), now);
        const fired = due.map((s, i) => ({
          id: s.id,
          next: nextAfter(s.cronSchedule, now),
          runId: part.ids[i]!,
        }));
        await this.schedules.recordFired(tx, params, part.ctes, fired, now);
        tx.afterCommit(() => this.runs.queued());
        return { claimed: due.length, fired: due.length };
      });
    } catch (err) {
      if (isDatabaseUnreachable(err)) throw err;
      // One schedule that cannot start its run must not hold back the others: fire them one by one.
      return this.fireOneByOne(now, limit);
    }
  }

  private async fireOneByOne(now: Date, limit: number): Promise<{ claimed: number; fired: number }> {
    let claimed = 0;
    let fired = 0;
    for (; claimed < limit; claimed++) {
      const outcome = await this.schedules.db.transaction(async (tx) => {
        const [s] = await this.schedules.claimDue(tx, now, 1);
        if (!s) return 'none' as const;
        const next = nextAfter(s.cronSchedule, now);
        // A savepoint: a failed insert leaves the claim standing, to record why.
        await tx.execute('SAVEPOINT fire');
        try {
          const params = new StatementParams();
          const part = this.runs.insertManyPart(params, [await this.runFor(s)], now);
          await this.schedules.recordFired(
            tx,
            params,
            part.ctes,
            [{ id: s.id, next, runId: part.ids[0]! }],
            now,
          );
          tx.afterCommit(() => this.runs.queued());
          return 'fired' as const;
        } catch (err) {
          if (isDatabaseUnreachable(err)) throw err;
          await tx.execute('ROLLBACK TO SAVEPOINT fire');
          await this.schedules.recordSpawnError(tx, s.id, next, spawnError(err));
          return 'failed' as const;
        }
      });
      if (outcome === 'none') break;
      if (outcome === 'fired') fired++;
    }
    return { claimed, fired };
  }

  /**
   * The firing's run, its MCP credentials opened (the runs repository seals them again, for the run),
   * run as the schedule's named agent when it has one. An agent deleted since fails the firing (and
   * only it): the schedule records why, as for any run that cannot be created.
   */
  private async runFor(s: DueSchedule): Promise<NewRun> {
    const run = runOf(s);
    const opened = { ...run, agentConfig: this.credentials.open(run.agentConfig, sealIdOf(s.id)) };
    if (!s.agentUid) return opened;
    const agent = await this.namedAgents.defaults(s.teamId, s.agentUid);
    if (!agent) throw new Error(`agent ${s.agentUid} does not exist in this team any more`);
    return {
      ...opened,
      agentConfig: withAgentDefaults(opened.agentConfig, agent.config),
      ...namedAgentMarks(opened.metadata, agent),
    };
  }
}

/** The run a firing starts: the schedule's prompt and config, `source` SCHEDULED_AGENT, `schedule_id` in its metadata. */
function runOf(s: DueSchedule): NewRun {
  const config = withPrimarySkill({ ...s.agentConfig });
  if (config.skill_spec !== undefined && config.name === undefined)
    config.name = skillName(config.skill_spec);
  return {
    teamId: s.teamId,
    title: s.name,
    prompt: s.prompt,
    source: 'SCHEDULED_AGENT',
    creatorId: s.creatorId,
    agentConfig: config,
    metadata: {
      ...s.metadata,
      ...(s.automation !== null ? { automation: s.automation } : {}),
      schedule_id: s.id,
    },
    mode: s.mode ?? undefined,
    schedule: { schedule_id: s.id, schedule_name: s.name, cron_schedule: s.cronSchedule },
    ...(s.factoryUid ? { factoryUid: s.factoryUid } : {}),
  };
}

/** The schedule's next time strictly after `now` (null for one that will never fire again). */
function nextAfter(cron: string, now: Date): Date | null {
  const parsed = parseCron(cron);
  return 'error' in parsed ? null : parsed.schedule.next(now);
}

function spawnError(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  return `the run could not be created: ${message}`.slice(0, 1000);
}
