import { Inject, Injectable, Optional } from '@nestjs/common';
import { newUuid } from '../common/ids.js';
import { Database, paramRefs, type Queryable, type StatementPart } from '../database/database.js';
import type { RunEvent, RunState } from './run-state.js';
import { nextState, statesAllowing } from './run-state.js';
import { McpCredentials } from '../secrets/mcp-credentials.js';
import { RunsSignal } from './runs-signal.js';
import { SERVICE_WORKER_HOST, type NewRun, type Run } from './run.js';

/** The columns every run read selects, creator joined; `r` is runs, `p` principals. */
export const RUN_COLUMNS = `r.id, r.team_id, r.title, r.prompt, r.state, r.source, r.agent_config, r.worker_host,
  r.metadata, r.conversation_id, r.parent_run_id, r.mode, r.session_id, r.status_message, r.artifacts,
  r.agent_skill, r.execution_location, r.created_at, r.updated_at, r.started_at, r.ended_at,
  p.type AS creator_type, p.uid AS creator_uid, p.display_name AS creator_name`;

export const RUN_FROM = `runs r LEFT JOIN principals p ON p.id = r.creator_id`;

export function toRun(row: Record<string, unknown>): Run {
  return {
    id: row.id as string,
    teamId: row.team_id as string,
    title: row.title as string,
    prompt: row.prompt as string,
    state: row.state as RunState,
    source: row.source as Run['source'],
    creator: row.creator_uid
      ? {
          type: row.creator_type as 'user' | 'service_account',
          uid: row.creator_uid as string,
          displayName: row.creator_name as string,
        }
      : null,
    agentConfig: row.agent_config as Run['agentConfig'],
    workerHost: row.worker_host as string,
    metadata: row.metadata as Run['metadata'],
    conversationId: row.conversation_id as string,
    parentRunId: row.parent_run_id as string | null,
    mode: row.mode as string | null,
    sessionId: row.session_id as string | null,
    statusMessage: row.status_message as Run['statusMessage'],
    artifacts: row.artifacts as unknown[] | null,
    agentSkill: row.agent_skill as Run['agentSkill'],
    executionLocation: row.execution_location as string | null,
    createdAt: row.created_at as Date,
    updatedAt: row.updated_at as Date,
    startedAt: row.started_at as Date | null,
    endedAt: row.ended_at as Date | null,
  };
}

@Injectable()
export class RunsRepository {
  constructor(
    @Inject(Database) private readonly db: Database,
    /** MCP credentials are sealed on the way in and opened only for the harness (docs/security.md). */
    @Inject(McpCredentials) private readonly credentials: McpCredentials,
    @Optional() @Inject(RunsSignal) private readonly signal?: RunsSignal,
  ) {}

  /**
   * Inserts a QUEUED run (and its attachments) through `tx`, so callers that start runs as part of a
   * larger write (a factory dispatch) commit both together; the workers are woken once it committed.
   */
  async insert(tx: Queryable, run: NewRun, now: Date): Promise<string> {
    const part = this.insertManyPart([run], now, 1);
    await tx.execute(`WITH ${part.ctes} SELECT 1`, part.params);
    tx.afterCommit(() => this.queued());
    return part.ids[0]!;
  }

  /**
   * The CTEs (`new_runs`, `new_attachments`) that insert `runs` as part of a larger statement, their
   * parameters numbered from `$first`. With `keep`, a run is inserted only if its key (one per run)
   * is among the `id`s the CTE `keep.cte` returns: a webhook delivery's runs when that same statement
   * accepted the delivery. The caller signals `queued()` once it committed.
   */
  insertManyPart(
    runs: NewRun[],
    now: Date,
    first: number,
    keep?: { keys: string[]; cte: string },
  ): StatementPart & { ids: string[] } {
    const ids = runs.map(() => newUuid());
    const column = <V>(value: (run: NewRun, i: number) => V) => runs.map(value);
    const attachments = runs.flatMap((run, i) =>
      (run.attachments ?? []).map((a) => ({ runId: ids[i]!, ...a })),
    );
    const $ = paramRefs(first);
    // The attachments' foreign key is checked at the end of the statement, after new_runs inserted.
    const ctes = `new_runs AS (
         INSERT INTO runs (id, team_id, title, prompt, state, source, creator_id, agent_config, config_name, model_id,
                           environment_id, skill_spec, worker_host, metadata, conversation_id, parent_run_id, mode,
                           created_at, updated_at, search_text)
         SELECT id, team_id, title, prompt, 'QUEUED', source, creator_id, agent_config, config_name, model_id,
                environment_id, skill_spec, worker_host, metadata, conversation_id, parent_run_id, mode, ${$(17)}, ${$(17)},
                title || ' ' || authored || ' ' || coalesce(skill_spec, '')
           FROM unnest(${$(1)}::uuid[], ${$(2)}::uuid[], ${$(3)}::text[], ${$(4)}::text[], ${$(5)}::text[], ${$(6)}::uuid[],
                       ${$(7)}::jsonb[], ${$(8)}::text[], ${$(9)}::text[], ${$(10)}::text[], ${$(11)}::text[], ${$(12)}::text[],
                       ${$(13)}::jsonb[], ${$(14)}::uuid[], ${$(15)}::uuid[], ${$(16)}::text[], ${$(22)}::text[], ${$(23)}::text[])
             AS r(id, team_id, title, prompt, source, creator_id, agent_config, config_name, model_id, environment_id,
                  skill_spec, worker_host, metadata, conversation_id, parent_run_id, mode, authored, keep_key)
          ${keep ? `WHERE r.keep_key::uuid IN (SELECT id FROM ${keep.cte})` : ''}
         RETURNING id
       ), new_attachments AS (
         INSERT INTO run_attachments (run_id, file_name, content_type, content)
         SELECT * FROM unnest(${$(18)}::uuid[], ${$(19)}::text[], ${$(20)}::text[], ${$(21)}::bytea[]) AS a(run_id, f, c, b)
          ${keep ? 'WHERE a.run_id IN (SELECT id FROM new_runs)' : ''}
       )`;
    const params = [
      ids,
      column((r) => r.teamId),
      column((r) => r.title),
      column((r) => r.prompt),
      column((r) => r.source),
      column((r) => r.creatorId),
      column((r, i) => this.credentials.seal(r.agentConfig, ids[i]!)),
      column((r) => r.agentConfig.name ?? null),
      column((r) => r.agentConfig.model_id ?? null),
      column((r) => r.agentConfig.environment_id ?? null),
      column((r) => r.agentConfig.skill_spec ?? null),
      column((r) => r.agentConfig.worker_host ?? SERVICE_WORKER_HOST),
      column((r) => r.metadata ?? null),
      column((r, i) => r.conversationId ?? ids[i]),
      column((r) => r.parentRunId ?? null),
      column((r) => r.mode ?? null),
      now,
      attachments.map((a) => a.runId),
      attachments.map((a) => a.fileName),
      attachments.map((a) => a.contentType),
      attachments.map((a) => a.content),
      column((r) => r.authoredPrompt ?? r.prompt),
      keep?.keys ?? column(() => null),
    ];
    return { ctes, params, ids };
  }

  /** A claimed run's agent config as its harness gets it: MCP credentials opened. */
  configForHarness(runId: string, stored: Record<string, unknown>): Record<string, unknown> {
    return this.credentials.open(stored, runId);
  }

  /** Wakes the workers: runs were queued (call after the commit that inserted them). */
  queued(): void {
    this.signal?.queued();
    this.signal?.changed();
  }

  /** Tells the live streams that runs changed (call after the commit that changed them). */
  changed(): void {
    this.signal?.changed();
  }

  /** One run on its own: one statement, no transaction around it. */
  async create(run: NewRun, now: Date): Promise<string> {
    return this.insert(this.db, run, now);
  }

  async findForTeam(teamId: string, runId: string): Promise<Run | undefined> {
    const rows = await this.db.query(
      `SELECT ${RUN_COLUMNS} FROM ${RUN_FROM} WHERE r.id = $1 AND r.team_id = $2`,
      [runId, teamId],
    );
    return rows[0] ? toRun(rows[0]) : undefined;
  }

  async conversationExists(teamId: string, conversationId: string): Promise<boolean> {
    const rows = await this.db.query(
      `SELECT 1 FROM runs WHERE team_id = $1 AND conversation_id = $2 LIMIT 1`,
      [teamId, conversationId],
    );
    return rows.length > 0;
  }

  /**
   * Applies a state machine event (or a path of them, e.g. start then succeed for a run whose whole
   * life fits in one report) if the run is still in a state that allows it (compare-and-set on the
   * state, so racing writers cannot both win). Returns the new state, or undefined if the run moved
   * on meanwhile.
   */
  async transition(
    tx: Queryable,
    runId: string,
    from: RunState,
    event: RunEvent | RunEvent[],
    now: Date,
    /**
     * `leaseOwner`: only if this worker still holds the run (a worker's own reports). `startedAt`:
     * when the path passes through INPROGRESS, when the harness started (default `now`).
     */
    extra: {
      statusMessage?: Run['statusMessage'];
      leaseOwner?: string;
      startedAt?: Date;
      /** CTEs to run in the same statement, whatever the update does, built for its first free parameter. */
      with?: (first: number) => StatementPart;
    } = {},
  ): Promise<RunState | undefined> {
    const path = Array.isArray(event) ? event : [event];
    const visited: RunState[] = [];
    for (const e of path) visited.push(nextState(visited.at(-1) ?? from, e));
    const to = visited.at(-1)!;
    const ended = to === 'SUCCEEDED' || to === 'FAILED' || to === 'ERROR' || to === 'CANCELLED';
    const params = [
      runId,
      from,
      to,
      now,
      ended,
      extra.statusMessage ?? null,
      statesAllowing(path[0]!),
      extra.leaseOwner ?? null,
      visited.includes('INPROGRESS'),
      extra.startedAt ?? now,
    ];
    const part = extra.with?.(params.length + 1);
    const changed = await tx.execute(
      `${part ? `WITH ${part.ctes} ` : ''}UPDATE runs SET state = $3, updated_at = $4,
              ended_at = CASE WHEN $5 THEN $4 WHEN $3 = 'QUEUED' THEN NULL ELSE ended_at END,
              started_at = CASE WHEN $9 THEN coalesce(started_at, $10) ELSE started_at END,
              status_message = CASE WHEN $6::jsonb IS NOT NULL THEN $6::jsonb WHEN $3 = 'QUEUED' THEN NULL ELSE status_message END
        WHERE id = $1 AND state = $2 AND $2 = ANY($7::text[]) AND ($8::text IS NULL OR lease_owner = $8)`,
      [...params, ...(part?.params ?? [])],
    );
    if (changed && to === 'QUEUED') tx.afterCommit(() => this.queued());
    else if (changed || part) tx.afterCommit(() => this.changed());
    return changed ? to : undefined;
  }

  /** Appends artifacts (a worker's harness reported them) to the run's list. */
  async addArtifacts(q: Queryable, runId: string, artifacts: Record<string, unknown>[]): Promise<void> {
    await q.execute(
      `UPDATE runs SET artifacts = coalesce(artifacts, '[]'::jsonb) || $2::jsonb WHERE id = $1`,
      [runId, JSON.stringify(artifacts)],
    );
  }

  /** Clears the run's status message (a BLOCKED run's question, once a follow-up answered it). */
  async clearStatusMessage(q: Queryable, runId: string): Promise<void> {
    await q.execute(`UPDATE runs SET status_message = NULL WHERE id = $1`, [runId]);
  }

  async addFollowup(tx: Queryable, runId: string, message: string, mode: string | undefined): Promise<void> {
    await tx.execute(`INSERT INTO run_followups (run_id, message, mode) VALUES ($1, $2, $3)`, [
      runId,
      message,
      mode ?? null,
    ]);
  }

  async lockForUpdate(tx: Queryable, teamId: string, runId: string): Promise<RunState | undefined> {
    const rows = await tx.query<{ state: RunState }>(
      `SELECT state FROM runs WHERE id = $1 AND team_id = $2 FOR UPDATE`,
      [runId, teamId],
    );
    return rows[0]?.state;
  }
}
