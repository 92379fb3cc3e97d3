import { invalidParam } from '../common/problem.js';
import type { QueryParams } from '../common/query-params.js';
import { parseRunListQuery, type RunListFilters } from '../runs/run-list.js';
import type { RunSource } from '../runs/run.js';
import type { StateChange } from './run-activity.repository.js';

/** The run list's filters a team stream takes; the list's paging, sorting and search do not apply. */
export type RunStreamFilter = Pick<
  RunListFilters,
  | 'state'
  | 'name'
  | 'modelId'
  | 'creator'
  | 'source'
  | 'environmentId'
  | 'skillSpec'
  | 'createdAfter'
  | 'createdBefore'
  | 'metadata'
  | 'automationId'
  | 'factoryUid'
  | 'factoryOnly'
  | 'executionLocation'
>;

const LIST_ONLY = [
  'limit',
  'cursor',
  'sort_by',
  'sort_order',
  'q',
  'artifact_type',
  'schedule_id',
  'updated_after',
  'ancestor_run_id',
  'executor',
  // A task's status depends on its descendants, which a run's change does not carry.
  'task_status',
];

/** A team stream's query string, parsed as the run list parses it (same names, same 400s). */
export function parseRunStreamQuery(query: QueryParams): RunStreamFilter {
  for (const name of LIST_ONLY)
    if (query.has(name))
      throw invalidParam(name, `${name} applies to the run list, not to a stream of run changes`);
  return parseRunListQuery(query).filters;
}

/**
 * Whether a state change passes the filter, decided in memory for every stream (the run list's
 * WHERE, over the change's new state and its run's fields): `state` is the state entered.
 */
export function matchesRunStream(f: RunStreamFilter, c: StateChange): boolean {
  const r = c.run;
  if (f.state?.length && !f.state.includes(c.state)) return false;
  if (f.name !== undefined && r.config_name !== f.name) return false;
  if (f.modelId !== undefined && r.model_id !== f.modelId) return false;
  if (f.creator !== undefined && r.creator_uid !== f.creator) return false;
  if (f.source !== undefined && !f.source.includes(r.source as RunSource)) return false;
  if (f.environmentId !== undefined && r.environment_id !== f.environmentId) return false;
  if (f.skillSpec !== undefined && r.skill_spec !== f.skillSpec) return false;
  if (f.createdAfter || f.createdBefore) {
    const created = new Date(r.created_at).getTime();
    if (f.createdAfter && !(created > Date.parse(f.createdAfter))) return false;
    if (f.createdBefore && !(created < Date.parse(f.createdBefore))) return false;
  }
  // Every factoryd run runs on a worker: REMOTE (docs/run-api.md).
  if (f.executionLocation === 'LOCAL') return false;
  const stamped = (key: string) =>
    r.metadata && Object.hasOwn(r.metadata, key) ? r.metadata[key] : undefined;
  if (f.automationId !== undefined && stamped('automation_id') !== f.automationId) return false;
  if (f.factoryUid !== undefined && !(r.factory_uid !== null && f.factoryUid.includes(r.factory_uid)))
    return false;
  if (f.factoryOnly && r.factory_uid === null) return false;
  for (const [key, value] of f.metadata ?? []) {
    if (!r.metadata || !Object.hasOwn(r.metadata, key) || r.metadata[key] !== value) return false;
  }
  return true;
}
