import { Inject, Injectable } from '@nestjs/common';
import {
  forgedCursor,
  PAGE_TIME_LIMIT_MS,
  pageOf,
  parsePageRequest,
  type CursorPosition,
  type PageInfo,
} from '../common/pagination.js';
import { invalidParam } from '../common/problem.js';
import { UUID_PATTERN } from '../common/ids.js';
import type { QueryParams } from '../common/query-params.js';
import { Database } from '../database/database.js';
import { RUN_STATES, type RunState } from './run-state.js';
import { RUN_SOURCES, type Run, type RunSource } from './run.js';
import { RUN_COLUMNS, RUN_FROM, toRun, type RunRow } from './runs.repository.js';
import { ARTIFACT_TYPES, type ArtifactType } from './artifact.js';

/**
 * GET /agent/runs: the query string parsed into a typed `RunListQuery` (400 naming the parameter on
 * any bad value), and the repository that turns one into a single keyset-paginated statement.
 *
 * Filters are one table, RUN_FILTERS: each entry reads its query parameter into a typed value and
 * turns that value into one SQL condition. A new filter is one entry there (and its ApiQuery in
 * runs.controller.ts).
 */
const SORT_KEYS = {
  updated_at: 'r.updated_at',
  created_at: 'r.created_at',
  title: 'r.title',
  // By skill spec, runs without one last (ascending): '0' + spec sorts before '1'.
  agent: `(CASE WHEN r.skill_spec IS NULL THEN '1' ELSE '0' || r.skill_spec END)`,
} as const;
/** Sort keys that are text (the rest are timestamps). */
const textKey = (k: SortKey) => k === 'title' || k === 'agent';
export type SortKey = keyof typeof SORT_KEYS;

/** Adds a statement parameter and returns its `$n`. */
type Param = (value: unknown) => string;

interface RunFilter<T> {
  /** The typed value from the query string; undefined when the caller does not filter on it. */
  parse(query: QueryParams): T | undefined;
  /** The SQL condition on `r` (runs) that keeps matching runs. */
  where(value: T, p: Param): string;
}

const filter = <T>(f: RunFilter<T>): RunFilter<T> => f;

/**
 * A metadata key the service stamps (automation_id, schedule_id) equal to the parameter.
 * As containment, so the `runs_metadata` GIN index finds the runs: compared as `metadata->>key`, a
 * value no run has walked all of a team's runs (4.2 s at 10M runs).
 */
const stamped = (param: string, key: string) =>
  filter<string>({
    parse: (q) => q.one(param),
    where: (v, p) => `r.metadata @> ${p(JSON.stringify({ [key]: v }))}::jsonb`,
  });

const scheduleStamp = stamped('schedule_id', 'schedule_id');

/** A parameter compared for equality with one column. */
const equals = (param: string, column: string) =>
  filter<string>({ parse: (q) => q.one(param), where: (v, p) => `${column} = ${p(v)}` });

/** An RFC 3339 timestamp parameter compared with a timestamp column. */
const timestamp = (param: string, condition: (value: string) => string) =>
  filter<string>({
    parse: (q) => {
      const v = q.one(param);
      if (v !== undefined && !isRfc3339(v))
        throw invalidParam(
          param,
          `${param} must be an RFC 3339 timestamp such as 2026-01-31T12:00:00Z, got "${v}"`,
        );
      return v;
    },
    where: (v, p) => condition(p(v)),
  });

const MAX_METADATA_FILTERS = 5;

/** What `q` searches: title, authored prompt and skill, kept in the column the `runs_search` trigram index covers. */
export const RUN_SEARCH_TEXT = `r.search_text`;

/** A repeatable parameter whose values come from a fixed set (400 naming the first that does not). */
const oneOfEach = <T extends string>(param: string, allowed: readonly T[]) =>
  filter<T[]>({
    parse: (q) => {
      const values = q.all(param);
      for (const v of values) {
        if (!(allowed as readonly string[]).includes(v))
          throw invalidParam(param, `${param} must be one of ${allowed.join(', ')}, got "${v}"`);
      }
      return values.length ? ([...new Set(values)] as T[]) : undefined;
    },
    where: (v, p) => `r.${param} = ANY(${p(v)}::text[])`,
  });

/** The states in which a run or one of its descendants makes its task `running`. */
const LIVE_STATES: readonly RunState[] = ['QUEUED', 'PENDING', 'CLAIMED', 'INPROGRESS'];

/** The clients' `task_status`: the run (the root of its own task) by its state or its descendants'. */
export const TASK_STATUSES = ['running', 'failed', 'blocked', 'cancelled', 'complete'] as const;
export type TaskStatus = (typeof TASK_STATUSES)[number];
const TASK_STATES: Record<Exclude<TaskStatus, 'running'>, RunState[]> = {
  failed: ['FAILED', 'ERROR'],
  blocked: ['BLOCKED'],
  cancelled: ['CANCELLED'],
  complete: ['SUCCEEDED'],
};

/** The run `q` names, if it is a run id or a run's URL (its `session_link`, `…/ui/runs/<id>`). */
function runIdIn(q: string): string | undefined {
  const s = q.trim();
  if (UUID_PATTERN.test(s)) return s;
  const id = /^https?:\/\/\S*\/runs\/([^/]+)\/?$/i.exec(s)?.[1];
  return id && UUID_PATTERN.test(id) ? id : undefined;
}

const RUN_FILTERS = {
  state: filter<RunState[]>({
    parse: (q) => {
      const states = q.all('state');
      for (const s of states) {
        if (!(RUN_STATES as readonly string[]).includes(s))
          throw invalidParam('state', `state must be one of ${RUN_STATES.join(', ')}, got "${s}"`);
      }
      return states.length ? ([...new Set(states)] as RunState[]) : undefined;
    },
    where: (v, p) => (v.length === 1 ? `r.state = ${p(v[0])}` : `r.state = ANY(${p(v)}::text[])`),
  }),
  name: equals('name', 'r.config_name'),
  modelId: equals('model_id', 'r.model_id'),
  // By the principal's id (one lookup), so the per-team creator index serves the page in order.
  creator: filter<string>({
    parse: (q) => q.one('creator'),
    where: (v, p) => `r.creator_id = (SELECT id FROM principals WHERE uid = ${p(v)})`,
  }),
  // The newest TypeScript client's CUSTOM_WEBHOOK names runs a factory automation starts from a custom
  // webhook: factoryd's WEBHOOK runs, which it selects (docs/run-api.md, "Run sources").
  source: filter<RunSource[]>({
    parse: (q) => {
      const sources = oneOfEach('source', RUN_SOURCES).parse(q);
      return sources && [...new Set(sources.map((s) => (s === 'CUSTOM_WEBHOOK' ? 'WEBHOOK' : s)))];
    },
    where: (v, p) => `r.source = ANY(${p(v)}::text[])`,
  }),
  /** null: runs with no environment (`empty-environment`). */
  environmentId: filter<string | null>({
    parse: (q) => {
      const environment = q.one('environment_id');
      return environment === 'empty-environment' ? null : environment;
    },
    where: (v, p) => (v === null ? `r.environment_id IS NULL` : `r.environment_id = ${p(v)}`),
  }),
  skillSpec: filter<string>({
    parse: (q) => q.one('skill_spec') ?? q.one('skill'),
    where: (v, p) => `r.skill_spec = ${p(v)}`,
  }),
  createdAfter: timestamp('created_after', (v) => `r.created_at > ${v}::timestamptz`),
  createdBefore: timestamp('created_before', (v) => `r.created_at < ${v}::timestamptz`),
  updatedAfter: timestamp('updated_after', (v) => `r.updated_at > ${v}::timestamptz`),
  /** A Map, so keys such as `constructor` or `__proto__` are ordinary keys. */
  metadata: filter<Map<string, string>>({
    parse: (q) => {
      const metadata = new Map<string, string>();
      for (const [key, value] of q.entries()) {
        const m = /^metadata\[(.*)\]$/.exec(key);
        if (!m) continue;
        if (!/^[a-zA-Z0-9._-]{1,64}$/.test(m[1]))
          throw invalidParam(key, `metadata filter key "${m[1]}" must match [a-zA-Z0-9._-]{1,64}`);
        if (metadata.has(m[1])) throw invalidParam(key, `metadata[${m[1]}] may be given once`);
        metadata.set(m[1], value);
      }
      if (metadata.size > MAX_METADATA_FILTERS)
        throw invalidParam(
          'metadata',
          `at most ${MAX_METADATA_FILTERS} metadata[key]=value filters may be combined`,
        );
      return metadata.size ? metadata : undefined;
    },
    // Object.fromEntries defines own properties: a `__proto__` key stays a key.
    where: (v, p) => `r.metadata @> ${p(JSON.stringify(Object.fromEntries(v)))}::jsonb`,
  }),
  q: filter<string>({
    parse: (query) => {
      const q = query.one('q');
      if (q !== undefined && q.length > 200) throw invalidParam('q', 'q must be at most 200 characters');
      return q === '' ? undefined : q;
    },
    where: (v, p) => {
      const text = `${RUN_SEARCH_TEXT} ILIKE ${p(`%${v.replace(/[\\%_]/g, (c) => `\\${c}`)}%`)}`;
      const id = runIdIn(v);
      return id ? `(${text} OR r.id = ${p(id)}::uuid)` : text;
    },
  }),
  artifactType: filter<ArtifactType>({
    parse: (q) => {
      const t = q.one('artifact_type');
      if (t !== undefined && !(ARTIFACT_TYPES as readonly string[]).includes(t))
        throw invalidParam('artifact_type', `artifact_type must be one of ${ARTIFACT_TYPES.join(', ')}`);
      return t as ArtifactType | undefined;
    },
    // The team's runs that left one (run_artifacts_team_type), or a probe per run in the page's order.
    where: (v, p) =>
      `EXISTS (SELECT 1 FROM run_artifacts a
                WHERE a.run_id = r.id AND a.team_id = r.team_id AND a.artifact_type = ${p(v)})`,
  }),
  // The runs a schedule started: found through their metadata stamp (the runs_metadata index), kept
  // only if the schedule fired them (their `schedule`), so a caller's metadata.schedule_id is not one.
  scheduleId: filter<string>({
    parse: (q) => q.one('schedule_id'),
    where: (v, p) => `${scheduleStamp.where(v, p)} AND r.schedule->>'schedule_id' = ${p(v)}`,
  }),
  // The Oz clients' other filters (docs/run-api.md, "List runs").
  // Every run, descendants included, whose chain of parent_run_id reaches the ancestor.
  ancestorRunId: filter<string>({
    parse: (q) => {
      const id = q.one('ancestor_run_id');
      if (id !== undefined && !UUID_PATTERN.test(id))
        throw invalidParam('ancestor_run_id', 'ancestor_run_id must be a run id (a UUID)');
      return id;
    },
    where: (v, p) => `r.id IN (WITH RECURSIVE d(id) AS (
        SELECT c.id FROM runs c WHERE c.parent_run_id = ${p(v)}::uuid AND c.team_id = $1
        UNION SELECT c.id FROM runs c JOIN d ON c.parent_run_id = d.id WHERE c.team_id = $1)
      SELECT id FROM d)`,
  }),
  // Stamped on the runs an automation started (metadata automation_id).
  automationId: stamped('automation_id', 'automation_id'),
  // The factory whose agent executed the run (never the caller's metadata).
  factoryUid: filter<string[]>({
    parse: (q) => {
      const uids = q.all('factory_uid');
      return uids.length ? [...new Set(uids)] : undefined;
    },
    where: (v, p) => `r.factory_uid = ANY(${p(v)}::text[])`,
  }),
  factoryOnly: filter<true>({
    parse: (q) => {
      const only = q.one('factory_only');
      if (only !== undefined && only !== 'true' && only !== 'false')
        throw invalidParam('factory_only', `factory_only must be true or false, got "${only}"`);
      return only === 'true' ? true : undefined;
    },
    where: () => `r.factory_uid IS NOT NULL`,
  }),
  taskStatus: filter<TaskStatus[]>({
    parse: (q) => oneOfEach('task_status', TASK_STATUSES).parse(q),
    where: (v, p) => {
      const states = v.flatMap((s) => (s === 'running' ? LIVE_STATES : TASK_STATES[s]));
      const byState = `r.state = ANY(${p(states)}::text[])`;
      if (!v.includes('running')) return byState;
      // Or one of its descendants is live: every ancestor of the team's live child runs.
      const live = p(LIVE_STATES);
      return `(${byState} OR r.id IN (WITH RECURSIVE up(id) AS (
          SELECT c.parent_run_id FROM runs c
           WHERE c.team_id = $1 AND c.parent_run_id IS NOT NULL AND c.state = ANY(${live}::text[])
          UNION SELECT a.parent_run_id FROM runs a JOIN up ON a.id = up.id
           WHERE a.team_id = $1 AND a.parent_run_id IS NOT NULL)
        SELECT id FROM up))`;
    },
  }),
  // Every factoryd run runs on a worker (REMOTE); none in a caller's own app (LOCAL).
  executionLocation: filter<'LOCAL' | 'REMOTE'>({
    parse: (q) => {
      const location = q.one('execution_location');
      if (location !== undefined && location !== 'LOCAL' && location !== 'REMOTE')
        throw invalidParam('execution_location', 'execution_location must be LOCAL or REMOTE');
      return location as 'LOCAL' | 'REMOTE' | undefined;
    },
    where: (v) => (v === 'LOCAL' ? 'false' : 'true'),
  }),
  executor: filter<string>({
    parse: (q) => q.one('executor'),
    where: (v, p) => {
      const who = p(v);
      return `(r.executor->>'uid' = ${who} OR (r.executor IS NULL AND r.creator_id = (SELECT id FROM principals WHERE uid = ${who})))`;
    },
  }),
};

type FilterName = keyof typeof RUN_FILTERS;
/** The filters a listing applies, each typed as its RUN_FILTERS entry reads it. */
export type RunListFilters = {
  [K in FilterName]?: (typeof RUN_FILTERS)[K] extends RunFilter<infer T> ? T : never;
};

export interface RunListQuery {
  limit: number;
  sortBy: SortKey;
  sortOrder: 'asc' | 'desc';
  after?: CursorPosition;
  filters: RunListFilters;
}

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?([Zz]|[+-](\d{2}):(\d{2}))$/;

/** RFC 3339 with every field in range (Date.parse takes 2026-02-30; PostgreSQL would not). */
export function isRfc3339(v: string): boolean {
  const m = RFC3339.exec(v);
  if (!m) return false;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number);
  const daysInMonth = new Date(Date.UTC(year, month, 0)).getUTCDate();
  return (
    year >= 1 &&
    month >= 1 &&
    month <= 12 &&
    day >= 1 &&
    day <= daysInMonth &&
    hour <= 23 &&
    minute <= 59 &&
    second <= 59 &&
    (m[9] === undefined || (Number(m[9]) <= 14 && Number(m[10]) <= 59))
  );
}
export function parseRunListQuery(query: QueryParams): RunListQuery {
  const sortBy = (query.one('sort_by') ?? 'updated_at') as SortKey;
  if (!(sortBy in SORT_KEYS))
    throw invalidParam('sort_by', `sort_by must be one of updated_at, created_at, title, agent`);
  const sortOrder = (query.one('sort_order') ?? 'desc') as 'asc' | 'desc';
  if (sortOrder !== 'asc' && sortOrder !== 'desc')
    throw invalidParam('sort_order', 'sort_order must be asc or desc');
  const filters: Record<string, unknown> = {};
  for (const [name, f] of Object.entries(RUN_FILTERS) as Array<[FilterName, RunFilter<unknown>]>) {
    const value = f.parse(query);
    if (value !== undefined) filters[name] = value;
  }
  const page = parsePageRequest(query, cursorScope(sortBy, sortOrder), { fallback: 20, max: 500 });
  if (page.after && !cursorFits(page.after, sortBy)) throw forgedCursor();
  return { limit: page.limit, sortBy, sortOrder, after: page.after, filters: filters as RunListFilters };
}

const PG_TIMESTAMP = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d{1,6})?[+-]\d{2}(:\d{2})?$/;

/** A decoded cursor must hold values the SQL can take, or a forged one would reach the database. */
function cursorFits(after: CursorPosition, sortBy: SortKey): boolean {
  return textKey(sortBy)
    ? typeof after.key === 'string'
    : typeof after.key === 'string' && PG_TIMESTAMP.test(after.key);
}

function cursorScope(sortBy: SortKey, order: string): string {
  return `runs:${sortBy}:${order}`;
}

/**
 * The page's statement: WHERE, ORDER BY and LIMIT; selects `sort_key` for the next cursor.
 * `planEachTime` when it filters: how many runs a filter's value matches decides the plan (walk the
 * team's runs in order, or find the matches and sort them), so a filtered page is planned for its
 * values every time (0.2-0.3 ms) rather than risk a generic plan that walks every run of the team for
 * a value that matches none (QueryOptions). An unfiltered page has one good plan for every team.
 */
export function buildRunListSql(
  teamId: string,
  query: RunListQuery,
): { sql: string; params: unknown[]; planEachTime: boolean } {
  const params: unknown[] = [teamId];
  const p: Param = (v) => {
    params.push(v);
    return `$${params.length}`;
  };
  const where = ['r.team_id = $1'];
  for (const [name, value] of Object.entries(query.filters) as Array<[FilterName, unknown]>) {
    if (value !== undefined) where.push((RUN_FILTERS[name] as RunFilter<unknown>).where(value, p));
  }
  const filtered = where.length > 1;
  const key = SORT_KEYS[query.sortBy];
  const dir = query.sortOrder === 'desc' ? 'DESC' : 'ASC';
  if (query.after) {
    const cmp = query.sortOrder === 'desc' ? '<' : '>';
    const keyParam = textKey(query.sortBy) ? p(query.after.key) : `${p(query.after.key)}::timestamptz`;
    where.push(`(${key}, r.id) ${cmp} (${keyParam}, ${p(query.after.id)}::uuid)`);
  }
  // Timestamps go into the cursor as PostgreSQL text, which keeps the microseconds a JS Date drops.
  const sortKey = textKey(query.sortBy) ? key : `${key}::text`;
  const sql = `SELECT ${RUN_COLUMNS}, ${sortKey} AS sort_key FROM ${RUN_FROM}
    WHERE ${where.join(' AND ')}
    ORDER BY ${key} ${dir}, r.id ${dir}
    LIMIT ${query.limit + 1}`;
  return { sql, params, planEachTime: filtered };
}

/**
 * What the caller is told when a page's statement ran past PAGE_TIME_LIMIT_MS. A page is found in
 * under 10 ms at 10M runs where an index serves its filter and order; these walk the team's runs.
 */
const PAGE_TOO_LONG =
  `Finding this page of runs took longer than ${PAGE_TIME_LIMIT_MS / 1000} s and was stopped. ` +
  'Retry later, or narrow the list (state, created_after, created_before): filtering by ' +
  'executor, or sorting by agent, walks every run of the team.';

/** The run listing's reads: one statement per page. */
@Injectable()
export class RunListRepository {
  constructor(@Inject(Database) private readonly db: Database) {}

  async page(teamId: string, query: RunListQuery): Promise<{ runs: Run[]; pageInfo: PageInfo }> {
    const { sql, params, planEachTime } = buildRunListSql(teamId, query);
    const rows = await this.db.queryWithin<RunRow & { sort_key: string }>(
      { ms: PAGE_TIME_LIMIT_MS, tooLong: PAGE_TOO_LONG },
      sql,
      params,
      { planEachTime },
    );
    const { items, pageInfo } = pageOf(rows, query.limit, (last) => ({
      scope: cursorScope(query.sortBy, query.sortOrder),
      key: last.sort_key,
      id: last.id,
    }));
    return { runs: items.map(toRun), pageInfo };
  }
}
