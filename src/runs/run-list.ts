import { decodeCursor, encodeCursor, type CursorPosition, type PageInfo } from '../common/cursor.js';
import { invalidParam } from '../common/problem.js';
import { UUID_PATTERN } from '../common/ids.js';
import { RUN_STATES, type RunState } from './run-state.js';
import { RUN_SOURCES, type RunSource } from './run.js';
import { ARTIFACT_TYPES, type ArtifactType } from './artifact.js';

/**
 * GET /agent/runs: the query string parsed into a filter (400 naming the parameter on any bad value),
 * and the filter turned into one keyset-paginated SQL statement.
 */
export const SORT_KEYS = {
  updated_at: 'r.updated_at',
  created_at: 'r.created_at',
  title: 'r.title',
  // By skill spec, runs without one last (ascending): '0' + spec sorts before '1'.
  agent: `(CASE WHEN r.skill_spec IS NULL THEN '1' ELSE '0' || r.skill_spec END)`,
} as const;
export type SortKey = keyof typeof SORT_KEYS;

export interface RunListFilter {
  limit: number;
  sortBy: SortKey;
  sortOrder: 'asc' | 'desc';
  after?: CursorPosition;
  states: RunState[];
  name?: string;
  modelId?: string;
  creator?: string;
  source?: RunSource;
  /** null: runs with no environment (`empty-environment`). */
  environmentId?: string | null;
  skillSpec?: string;
  createdAfter?: string;
  createdBefore?: string;
  updatedAfter?: string;
  /** A Map, so keys such as `constructor` or `__proto__` are ordinary keys. */
  metadata: Map<string, string>;
  q?: string;
  artifactType?: ArtifactType;
  scheduleId?: string;
  /** The Oz clients' other filters (docs/run-api.md, "List runs"). */
  oz: OzListFilters;
}

export interface OzListFilters {
  ancestorRunId?: string;
  automationId?: string;
  executionLocation?: 'LOCAL' | 'REMOTE';
  executor?: string;
  factoryUid?: string;
}

/** What `q` searches: title, authored prompt and skill, kept in the column the `runs_search` trigram index covers. */
export const RUN_SEARCH_TEXT = `r.search_text`;

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
const MAX_METADATA_FILTERS = 5;

export function parseRunListQuery(search: URLSearchParams): RunListFilter {
  const one = (name: string): string | undefined => {
    const all = search.getAll(name);
    if (all.length > 1) throw invalidParam(name, `${name} may be given once`);
    return all[0];
  };
  const limitText = one('limit');
  let limit = 20;
  if (limitText !== undefined) {
    if (!/^\d+$/.test(limitText) || Number(limitText) < 1 || Number(limitText) > 500) {
      throw invalidParam('limit', `limit must be a whole number from 1 to 500, got "${limitText}"`);
    }
    limit = Number(limitText);
  }
  const sortBy = (one('sort_by') ?? 'updated_at') as SortKey;
  if (!(sortBy in SORT_KEYS))
    throw invalidParam('sort_by', `sort_by must be one of updated_at, created_at, title, agent`);
  const sortOrder = (one('sort_order') ?? 'desc') as 'asc' | 'desc';
  if (sortOrder !== 'asc' && sortOrder !== 'desc')
    throw invalidParam('sort_order', 'sort_order must be asc or desc');

  const states = search.getAll('state').flatMap((s) => s.split(','));
  for (const s of states) {
    if (!(RUN_STATES as readonly string[]).includes(s)) {
      throw invalidParam('state', `state must be one of ${RUN_STATES.join(', ')}, got "${s}"`);
    }
  }
  const source = one('source');
  if (source !== undefined && !(RUN_SOURCES as readonly string[]).includes(source)) {
    throw invalidParam('source', `source must be one of ${RUN_SOURCES.join(', ')}, got "${source}"`);
  }
  const artifactType = one('artifact_type');
  if (artifactType !== undefined && !(ARTIFACT_TYPES as readonly string[]).includes(artifactType)) {
    throw invalidParam('artifact_type', `artifact_type must be one of ${ARTIFACT_TYPES.join(', ')}`);
  }
  const timestamp = (name: string) => {
    const v = one(name);
    if (v !== undefined && !isRfc3339(v)) {
      throw invalidParam(
        name,
        `${name} must be an RFC 3339 timestamp such as 2026-01-31T12:00:00Z, got "${v}"`,
      );
    }
    return v;
  };
  const skill = one('skill_spec') ?? one('skill');
  const environment = one('environment_id');
  const q = one('q');
  if (q !== undefined && q.length > 200) throw invalidParam('q', 'q must be at most 200 characters');

  const metadata = new Map<string, string>();
  for (const [key, value] of search) {
    const m = /^metadata\[(.*)\]$/.exec(key);
    if (!m) continue;
    if (!/^[a-zA-Z0-9._-]{1,64}$/.test(m[1])) {
      throw invalidParam(key, `metadata filter key "${m[1]}" must match [a-zA-Z0-9._-]{1,64}`);
    }
    if (metadata.has(m[1])) throw invalidParam(key, `metadata[${m[1]}] may be given once`);
    metadata.set(m[1], value);
  }
  if (metadata.size > MAX_METADATA_FILTERS) {
    throw invalidParam(
      'metadata',
      `at most ${MAX_METADATA_FILTERS} metadata[key]=value filters may be combined`,
    );
  }

  const cursor = one('cursor');
  const after =
    cursor === undefined || cursor === '' ? undefined : decodeCursor(cursor, cursorScope(sortBy, sortOrder));
  if (after && !cursorFits(after, sortBy)) {
    throw invalidParam(
      'cursor',
      'cursor is not a cursor issued by this server; pass next_cursor from the previous page',
    );
  }
  return {
    limit,
    sortBy,
    sortOrder,
    after,
    states: [...new Set(states)] as RunState[],
    name: one('name'),
    modelId: one('model_id'),
    creator: one('creator'),
    source: source as RunSource | undefined,
    environmentId: environment === 'empty-environment' ? null : environment,
    skillSpec: skill,
    createdAfter: timestamp('created_after'),
    createdBefore: timestamp('created_before'),
    updatedAfter: timestamp('updated_after'),
    metadata,
    q: q === '' ? undefined : q,
    artifactType: artifactType as RunListFilter['artifactType'],
    scheduleId: one('schedule_id'),
    oz: parseOzFilters(one),
  };
}

function parseOzFilters(one: (name: string) => string | undefined): OzListFilters {
  const ancestorRunId = one('ancestor_run_id');
  if (ancestorRunId !== undefined && !UUID_PATTERN.test(ancestorRunId))
    throw invalidParam('ancestor_run_id', 'ancestor_run_id must be a run id (a UUID)');
  const location = one('execution_location');
  if (location !== undefined && location !== 'LOCAL' && location !== 'REMOTE')
    throw invalidParam('execution_location', 'execution_location must be LOCAL or REMOTE');
  return {
    ancestorRunId,
    automationId: one('automation_id'),
    executionLocation: location as OzListFilters['executionLocation'],
    executor: one('executor'),
    factoryUid: one('factory_uid'),
  };
}

const PG_TIMESTAMP = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d{1,6})?[+-]\d{2}(:\d{2})?$/;

/** A decoded cursor must hold values the SQL can take, or a forged one would reach the database. */
function cursorFits(after: CursorPosition, sortBy: SortKey): boolean {
  if (!UUID_PATTERN.test(after.id)) return false;
  return textKey(sortBy)
    ? typeof after.key === 'string'
    : typeof after.key === 'string' && PG_TIMESTAMP.test(after.key);
}

/** Sort keys that are text (the rest are timestamps). */
const textKey = (k: SortKey) => k === 'title' || k === 'agent';

function cursorScope(sortBy: SortKey, order: string): string {
  return `runs:${sortBy}:${order}`;
}

/** The WHERE, ORDER BY and LIMIT for one page; selects `sort_key` for the next cursor. */
export function buildRunListSql(
  teamId: string,
  f: RunListFilter,
  columns: string,
  from: string,
): { sql: string; params: unknown[] } {
  const params: unknown[] = [teamId];
  const p = (v: unknown) => {
    params.push(v);
    return `$${params.length}`;
  };
  const where = ['r.team_id = $1'];
  if (f.states.length === 1) where.push(`r.state = ${p(f.states[0])}`);
  else if (f.states.length > 1) where.push(`r.state = ANY(${p(f.states)}::text[])`);
  if (f.name !== undefined) where.push(`r.config_name = ${p(f.name)}`);
  if (f.modelId !== undefined) where.push(`r.model_id = ${p(f.modelId)}`);
  // By the principal's id (one lookup), so the per-team creator index serves the page in order.
  if (f.creator !== undefined)
    where.push(`r.creator_id = (SELECT id FROM principals WHERE uid = ${p(f.creator)})`);
  if (f.source !== undefined) where.push(`r.source = ${p(f.source)}`);
  if (f.environmentId === null) where.push(`r.environment_id IS NULL`);
  else if (f.environmentId !== undefined) where.push(`r.environment_id = ${p(f.environmentId)}`);
  if (f.skillSpec !== undefined) where.push(`r.skill_spec = ${p(f.skillSpec)}`);
  if (f.createdAfter) where.push(`r.created_at > ${p(f.createdAfter)}::timestamptz`);
  if (f.createdBefore) where.push(`r.created_at < ${p(f.createdBefore)}::timestamptz`);
  if (f.updatedAfter) where.push(`r.updated_at > ${p(f.updatedAfter)}::timestamptz`);
  // Object.fromEntries defines own properties: a `__proto__` key stays a key.
  if (f.metadata.size)
    where.push(`r.metadata @> ${p(JSON.stringify(Object.fromEntries(f.metadata)))}::jsonb`);
  if (f.q !== undefined)
    where.push(`${RUN_SEARCH_TEXT} ILIKE ${p(`%${f.q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`)}`);
  if (f.artifactType)
    where.push(`r.artifacts @> ${p(JSON.stringify([{ artifact_type: f.artifactType }]))}::jsonb`);
  // No run is created by a schedule in factoryd yet; the filter is honoured by matching none.
  if (f.scheduleId !== undefined) where.push(`r.metadata->>'schedule_id' = ${p(f.scheduleId)}`);
  const oz = f.oz;
  // Every run, descendants included, whose chain of parent_run_id reaches the ancestor.
  if (oz.ancestorRunId)
    where.push(`r.id IN (WITH RECURSIVE d(id) AS (
        SELECT c.id FROM runs c WHERE c.parent_run_id = ${p(oz.ancestorRunId)}::uuid AND c.team_id = $1
        UNION SELECT c.id FROM runs c JOIN d ON c.parent_run_id = d.id WHERE c.team_id = $1)
      SELECT id FROM d)`);
  // Stamped on the runs an automation or a factory started (metadata automation_id, factory_uid).
  if (oz.automationId !== undefined) where.push(`r.metadata->>'automation_id' = ${p(oz.automationId)}`);
  if (oz.factoryUid !== undefined) where.push(`r.metadata->>'factory_uid' = ${p(oz.factoryUid)}`);
  // Every factoryd run runs on a worker (REMOTE); none in a caller's own app (LOCAL).
  if (oz.executionLocation === 'LOCAL') where.push('false');
  if (oz.executor !== undefined) {
    const who = p(oz.executor);
    where.push(
      `(r.executor->>'uid' = ${who} OR (r.executor IS NULL AND r.creator_id = (SELECT id FROM principals WHERE uid = ${who})))`,
    );
  }

  const key = SORT_KEYS[f.sortBy];
  const dir = f.sortOrder === 'desc' ? 'DESC' : 'ASC';
  if (f.after) {
    const cmp = f.sortOrder === 'desc' ? '<' : '>';
    const keyParam = textKey(f.sortBy) ? p(f.after.key) : `${p(f.after.key)}::timestamptz`;
    where.push(`(${key}, r.id) ${cmp} (${keyParam}, ${p(f.after.id)}::uuid)`);
  }
  // Timestamps go into the cursor as PostgreSQL text, which keeps the microseconds a JS Date drops.
  const sortKey = textKey(f.sortBy) ? key : `${key}::text`;
  const sql = `SELECT ${columns}, ${sortKey} AS sort_key FROM ${from}
    WHERE ${where.join(' AND ')}
    ORDER BY ${key} ${dir}, r.id ${dir}
    LIMIT ${f.limit + 1}`;
  return { sql, params };
}

/** Trims the extra row fetched to learn whether another page exists. */
export function pageOf<T>(
  rows: Array<T & { sort_key: string; id: string }>,
  f: RunListFilter,
): { items: Array<T & { sort_key: string; id: string }>; pageInfo: PageInfo } {
  const hasNext = rows.length > f.limit;
  const items = hasNext ? rows.slice(0, f.limit) : rows;
  const last = items[items.length - 1];
  return {
    items,
    pageInfo: hasNext
      ? {
          has_next_page: true,
          next_cursor: encodeCursor({
            scope: cursorScope(f.sortBy, f.sortOrder),
            key: last.sort_key,
            id: last.id,
          }),
        }
      : { has_next_page: false },
  };
}
