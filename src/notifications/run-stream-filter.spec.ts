import { describe, expect, it } from 'vitest';
import { QueryParams } from '../common/query-params.js';
import type { StateChange } from './run-activity.repository.js';
import { matchesRunStream, parseRunStreamQuery } from './run-stream-filter.js';

const change = (run: Partial<StateChange['run']>): StateChange => ({
  id: 1,
  run_id: 'r1',
  team_id: 't1',
  previous_state: null,
  state: 'QUEUED',
  execution: 0,
  worker_id: null,
  status_message: null,
  at: new Date(),
  run: {
    config_name: null,
    model_id: null,
    environment_id: null,
    skill_spec: null,
    source: 'API',
    factory_uid: null,
    metadata: null,
    created_at: new Date(),
    creator_uid: null,
    ...run,
  },
});
const matches = (query: string, run: Partial<StateChange['run']>) =>
  matchesRunStream(parseRunStreamQuery(QueryParams.parse(query)), change(run));

describe('a team stream’s filters, as the run list reads them', () => {
  it('takes several sources, CUSTOM_WEBHOOK for the WEBHOOK runs', () => {
    expect(matches('source=API&source=FACTORY', { source: 'FACTORY' })).toBe(true);
    expect(matches('source=API,FACTORY', { source: 'WEBHOOK' })).toBe(false);
    expect(matches('source=CUSTOM_WEBHOOK', { source: 'WEBHOOK' })).toBe(true);
  });

  it('knows a run’s factory by the factory that executed it, never by its metadata', () => {
    expect(matches('factory_uid=F1&factory_uid=F2', { factory_uid: 'F2' })).toBe(true);
    expect(matches('factory_uid=F1', { factory_uid: null, metadata: { factory_uid: 'F1' } })).toBe(false);
    expect(matches('factory_only=true', { factory_uid: 'F1' })).toBe(true);
    expect(matches('factory_only=true', { factory_uid: null })).toBe(false);
    expect(matches('factory_only=false', { factory_uid: null })).toBe(true);
  });

  it('refuses task_status, which a run’s change cannot decide (its descendants are not in it)', () => {
    expect(() => parseRunStreamQuery(QueryParams.parse('task_status=running'))).toThrow(/task_status/);
  });
});
