import { Inject, Injectable, Optional } from '@nestjs/common';
import { newUuid } from '../common/ids.js';
import { Database, type Queryable, type StatementPart } from '../database/database.js';
import { StatementParams } from '../database/multi-row.js';
import type { RunEvent, RunState } from './run-state.js';
import { nextState, statesAllowing } from './run-state.js';
import { McpCredentials } from '../secrets/mcp-credentials.js';
import { RunsSignal } from './runs-signal.js';
import { SERVICE_WORKER_HOST, type NewRun, type Run } from './run.js';
import { MODEL_TOKEN_USAGE_COLUMN } from './run-usage.repository.js';
import { RUN_ARTIFACTS_COLUMN, runArtifactItems } from './run-artifacts.repository.js';

/** The columns every run read selects, creator joined; `r` is runs, `p` principals. */
export const RUN_COLUMNS = `r.id, r.team_id, r.title, r.prompt, r.state, r.source, r.agent_config, r.worker_host,
  r.metadata, r.conversation_id, r.parent_run_id, r.mode, r.session_id, r.status_message, ${RUN_ARTIFACTS_COLUMN},
  r.agent_skill, r.execution_location, r.executor, r.environment, r.factory_uid, r.root_run_id, r.schedule,
  r.created_at, r.updated_at, r.started_at, r.ended_at,
  p.type AS creator_type, p.uid AS creator_uid, p.display_name AS creator_name, ${MODEL_TOKEN_USAGE_COLUMN}`;

export const RUN_FROM = `runs r LEFT JOIN principals p ON p.id = r.creator_id`;

/** A new run's row: its columns as given, `authored` for its search text, `keep_key` for `keep`. */
const NEW_RUN_COLUMNS = {
  id: 'uuid',
  team_id: 'uuid',
  title: 'text',
  prompt: 'text',
  source: 'text',
  creator_id: 'uuid',
  agent_config: 'jsonb',
  config_name: 'text',
  model_id: 'text',
  environment_id: 'text',
  skill_spec: 'text',
  worker_host: 'text',
  metadata: 'jsonb',
  conversation_id: 'uuid',
  parent_run_id: 'uuid',
  mode: 'text',
  executor: 'jsonb',
  factory_uid: 'text',
  schedule: 'jsonb',
  authored: 'text',
  keep_key: 'uuid',
} as const;

const ATTACHMENT_COLUMNS = {
  run_id: 'uuid',
  file_name: 'text',
  content_type: 'text',
  content: 'bytea',
  payload_of: 'uuid',
} as const;

/** A row of RUN_COLUMNS (from RUN_FROM). */
export interface RunRow {
  id: string;
  team_id: string;
  title: string;
  prompt: string;
  state: RunState;
  source: Run['source'];
  agent_config: Run['agentConfig'];
  worker_host: string;
  metadata: Run['metadata'];
  conversation_id: string;
  parent_run_id: string | null;
  mode: string | null;
  session_id: string | null;
  status_message: Run['statusMessage'];
  /** The run's artifacts as RUN_ARTIFACTS_COLUMN gathers them (runArtifactItems shapes them). */
  artifacts: unknown;
  agent_skill: Run['agentSkill'];
  execution_location: string | null;
  executor: Run['executor'];
  environment: Run['environment'];
  factory_uid: string | null;
  root_run_id: string | null;
  schedule: Run['schedule'];
  created_at: Date;
  updated_at: Date;
  started_at: Date | null;
  ended_at: Date | null;
  creator_type: NonNullable<Run['creator']>['type'] | null;
  creator_uid: string | null;
  creator_name: string | null;
  model_token_usage: Run['modelTokenUsage'];
}

export function toRun(row: RunRow): Run {
  return {
    id: row.id,
    teamId: row.team_id,
    title: row.title,
    prompt: row.prompt,
    state: row.state,
    source: row.source,
    // The creator's three columns come from one principal: all set or all null.
    creator: row.creator_uid
      ? { type: row.creator_type!, uid: row.creator_uid, displayName: row.creator_name! }
      : null,
    agentConfig: row.agent_config,
    workerHost: row.worker_host,
    metadata: row.metadata,
    conversationId: row.conversation_id,
    parentRunId: row.parent_run_id,
    mode: row.mode,
    sessionId: row.session_id,
    statusMessage: row.status_message,
    artifacts: runArtifactItems(row.artifacts),
    agentSkill: row.agent_skill,
    executionLocation: row.execution_location,
    executor: row.executor,
    environment: row.environment ?? null,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    startedAt: row.started_at,
    endedAt: row.ended_at,
    modelTokenUsage: row.model_token_usage ?? null,
    factoryUid: row.factory_uid,
    rootRunId: row.root_run_id,
    schedule: row.schedule,
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
    const params = new StatementParams();
    const part = this.insertManyPart(params, [run], now);
    await tx.execute(`WITH ${part.ctes} SELECT 1`, params.values);
    tx.afterCommit(() => this.queued());
    return part.ids[0]!;
  }

  /**
   * The CTEs (`new_runs`, `new_attachments`) that insert `runs` as part of a larger statement, their
   * parameters added to `params`. With `keep`, a run is inserted only if its key (one per run) is
   * among the `id`s the CTE `keep.cte` returns: a webhook delivery's runs when that same statement
   * accepted the delivery. With `keep.payloads` (a CTE of the statement's delivery entries: `id`,
   * `payload` text), an attachment that is its delivery entry's payload is copied from there: the
   * body travels once per delivery, not once more (in hex) per run. The caller signals `queued()`
   * once it committed.
   */
  insertManyPart(
    params: StatementParams,
    runs: NewRun[],
    now: Date,
    keep?: { keys: string[]; cte: string; payloads?: string },
  ): { ctes: string; ids: string[] } {
    const ids = runs.map(() => newUuid());
    const newRuns = params.rows(
      'r',
      NEW_RUN_COLUMNS,
      runs.map((r, i) => ({
        id: ids[i],
        team_id: r.teamId,
        title: r.title,
        prompt: r.prompt,
        source: r.source,
        creator_id: r.creatorId,
        agent_config: this.credentials.seal(r.agentConfig, ids[i]!),
        config_name: r.agentConfig.name,
        model_id: r.agentConfig.model_id,
        environment_id: r.agentConfig.environment_id,
        skill_spec: r.agentConfig.skill_spec,
        worker_host: r.agentConfig.worker_host ?? SERVICE_WORKER_HOST,
        metadata: r.metadata,
        conversation_id: r.conversationId ?? ids[i],
        parent_run_id: r.parentRunId,
        mode: r.mode,
        executor: r.executor,
        factory_uid: r.factoryUid,
        schedule: r.schedule,
        authored: r.authoredPrompt ?? r.prompt,
        keep_key: keep?.keys[i],
      })),
    );
    const attachments = params.rows(
      'a',
      ATTACHMENT_COLUMNS,
      runs.flatMap((run, i) =>
        (run.attachments ?? []).map((a) =>
          keep?.payloads && a.deliveryEntry
            ? {
                run_id: ids[i],
                file_name: a.fileName,
                content_type: a.contentType,
                payload_of: a.deliveryEntry,
              }
            : { run_id: ids[i], file_name: a.fileName, content_type: a.contentType, content: a.content },
        ),
      ),
    );
    const created = params.add(now);
    // The attachments' foreign key is checked at the end of the statement, after new_runs inserted.
    const ctes = `new_runs AS (
         INSERT INTO runs (id, team_id, title, prompt, state, source, creator_id, agent_config, config_name, model_id,
                           environment_id, skill_spec, worker_host, metadata, conversation_id, parent_run_id, mode,
                           executor, factory_uid, schedule, root_run_id, created_at, updated_at, search_text)
         SELECT id, team_id, title, prompt, 'QUEUED', source, creator_id, agent_config, config_name, model_id,
                environment_id, skill_spec, worker_host, metadata, conversation_id, parent_run_id, mode,
                executor, factory_uid, schedule,
                (SELECT coalesce(p.root_run_id, p.id) FROM runs p WHERE p.id = r.parent_run_id),
                ${created}::timestamptz, ${created}::timestamptz, title || ' ' || authored || ' ' || coalesce(skill_spec, '')
           FROM ${newRuns}
          ${keep ? `WHERE r.keep_key IN (SELECT id FROM ${keep.cte})` : ''}
         RETURNING id
       ), new_attachments AS (
         INSERT INTO run_attachments (run_id, file_name, content_type, content)
         SELECT a.run_id, a.file_name, a.content_type,
                ${keep?.payloads ? `coalesce(a.content, (SELECT convert_to(p.payload, 'UTF8') FROM ${keep.payloads} p WHERE p.id = a.payload_of))` : 'a.content'}
           FROM ${attachments}
          ${keep ? 'WHERE a.run_id IN (SELECT id FROM new_runs)' : ''}
       )`;
    return { ctes, ids };
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
    const rows = await this.db.query<RunRow>(
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
    // The run by its id, its state checked as "not distinct from": as `state = $2`, a plan made for
    // 'QUEUED' matched the queue's partial indexes and read every team's queued runs (sqlStatesOtherThan
    // says when).
    const changed = await tx.execute(
      `${part ? `WITH ${part.ctes} ` : ''}UPDATE runs SET state = $3, updated_at = $4,
              ended_at = CASE WHEN $5 THEN $4 WHEN $3 = 'QUEUED' THEN NULL ELSE ended_at END,
              started_at = CASE WHEN $9 THEN coalesce(started_at, $10) ELSE started_at END,
              status_message = CASE WHEN $6::jsonb IS NOT NULL THEN $6::jsonb WHEN $3 = 'QUEUED' THEN NULL ELSE status_message END
        WHERE id = $1 AND state IS NOT DISTINCT FROM $2 AND $2 = ANY($7::text[]) AND ($8::text IS NULL OR lease_owner = $8)`,
      [...params, ...(part?.params ?? [])],
    );
    if (changed && to === 'QUEUED') tx.afterCommit(() => this.queued());
    else if (changed || part) tx.afterCommit(() => this.changed());
    return changed ? to : undefined;
  }

  /** Clears the run's status message (a BLOCKED run's question, once a follow-up answered it). */
  async clearStatusMessage(q: Queryable, runId: string): Promise<void> {
    await q.execute(`UPDATE runs SET status_message = NULL WHERE id = $1`, [runId]);
  }

  /** Stores a follow-up for the run's agent; its id. */
  async addFollowup(
    tx: Queryable,
    runId: string,
    message: string,
    mode: string | undefined,
  ): Promise<string> {
    const [row] = await tx.query<{ id: string }>(
      `INSERT INTO run_followups (run_id, message, mode) VALUES ($1, $2, $3) RETURNING id`,
      [runId, message, mode ?? null],
    );
    return row!.id;
  }

  /** Asks the worker of the run's current execution to stop its turn (handed over by its next control). */
  async requestInterrupt(tx: Queryable, runId: string): Promise<void> {
    await tx.execute(`UPDATE runs SET interrupt_execution = execution WHERE id = $1`, [runId]);
  }

  async lockForUpdate(tx: Queryable, teamId: string, runId: string): Promise<RunState | undefined> {
    const rows = await tx.query<{ state: RunState }>(
      `SELECT state FROM runs WHERE id = $1 AND team_id = $2 FOR UPDATE`,
      [runId, teamId],
    );
    return rows[0]?.state;
  }
}
