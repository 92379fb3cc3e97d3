import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { eventually } from './support/eventually.js';
import { startTestService, type TestService } from './support/service.js';

/** Verified API keys are trusted for API_KEY_CACHE_SECONDS, so a list request is one statement. */
let t: TestService;
const RUNS = '/api/v1/agent/runs';

beforeAll(async () => {
  t = await startTestService({ API_KEY_CACHE_SECONDS: '1' });
});
afterAll(() => t?.stop());

/**
 * The statements the service sends while `work` runs: through `query`, and through `queryWithin`
 * (a runs-list page: one round trip that bounds its time).
 */
async function statementsDuring(service: TestService, work: () => Promise<unknown>): Promise<string[]> {
  const seen: string[] = [];
  const db = service.service.db;
  const query = db.query.bind(db);
  const queryWithin = db.queryWithin.bind(db);
  const spies = [
    vi.spyOn(db, 'query').mockImplementation((sql, params, options) => {
      seen.push(sql);
      return query(sql, params, options);
    }),
    vi.spyOn(db, 'queryWithin').mockImplementation((limit, sql, params, options) => {
      seen.push(sql);
      return queryWithin(limit, sql, params, options);
    }),
  ];
  try {
    await work();
  } finally {
    for (const spy of spies) spy.mockRestore();
  }
  return seen;
}

describe('API key cache', () => {
  it('answers a list request with one statement once the key is verified', async () => {
    // A cache that outlasts the requests however slow the machine is (here 1 s ran out on a loaded one).
    const long = await startTestService({ API_KEY_CACHE_SECONDS: '60' });
    try {
      const key = await long.newKey([long.defaultTeam], ['runs:read', 'runs:write'], 'cached');
      expect((await long.call('POST', RUNS, { prompt: 'one' }, key)).status).toBe(200);
      const statements = await statementsDuring(long, async () => {
        for (let i = 0; i < 5; i++) expect((await long.call('GET', RUNS, undefined, key)).status).toBe(200);
      });
      expect(statements.filter((s) => /FROM api_keys/.test(s))).toEqual([]);
      expect(statements.filter((s) => /FROM runs r/.test(s))).toHaveLength(5);
    } finally {
      await long.stop();
    }
  });

  it('refuses a revoked key within API_KEY_CACHE_SECONDS', async () => {
    const key = await t.newKey([t.defaultTeam], ['runs:read'], 'to-revoke-cached');
    expect((await t.call('GET', RUNS, undefined, key)).status).toBe(200);
    const id = (await t.authRepo.listKeys()).find((k) => k.name === 'to-revoke-cached')!.id;
    // As `factoryd api-keys revoke` does, from another process: the service learns it from the database.
    expect(await t.authRepo.revokeKey(id)).toBe(true);
    const refused = await eventually(async () => {
      const res = await t.call('GET', RUNS, undefined, key);
      return res.status === 401 && res.body;
    }, 'the revoked key to be refused');
    expect(refused.error).toBe('authentication_required');
  });

  it('keeps each cached key to its own team', async () => {
    const a = await t.newTeam('cache-a');
    const b = await t.newTeam('cache-b');
    const runA = (await t.call('POST', RUNS, { prompt: 'a' }, a.key)).body.run_id;
    const runB = (await t.call('POST', RUNS, { prompt: 'b' }, b.key)).body.run_id;
    for (let i = 0; i < 3; i++) {
      const seenByA = (await t.call('GET', RUNS, undefined, a.key)).body.runs.map((r: any) => r.run_id);
      const seenByB = (await t.call('GET', RUNS, undefined, b.key)).body.runs.map((r: any) => r.run_id);
      expect(seenByA).toEqual([runA]);
      expect(seenByB).toEqual([runB]);
      expect((await t.call('GET', `${RUNS}/${runB}`, undefined, a.key)).status).toBe(404);
    }
  });
});
