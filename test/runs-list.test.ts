import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService } from './support/service.js';
import { statementsPreparedBy, whileLocked } from './support/database.js';
import { eventually } from './support/eventually.js';
import { QueryParams } from '../src/common/query-params.js';
import { parseRunListQuery, RunListRepository } from '../src/runs/run-list.js';

/** GET /agent/runs: every filter and sort of docs/run-api.md on data that tells them apart; cursors. */
let t: TestService;
let key: string;
let otherCreatorKey: string;
let creatorUid: string;
let otherCreatorUid: string;
const ids: Record<string, string> = {};

interface Seed {
  name: string;
  body: Record<string, unknown>;
  state: string;
  source?: string;
  created: string;
  updated: string;
  other?: boolean;
}

// created_at, updated_at and title orders all differ, so every sort is told apart.
const SEEDS: Seed[] = [
  {
    name: 'r1',
    body: {
      prompt: 'alpha: fix the parser bug',
      title: 'Charlie',
      config: { name: 'fixer', model_id: 'm-a', environment_id: 'env-1' },
      metadata: { repo: 'web', env: 'prod', team: 'x', a: '1', b: '2', c: '3' },
    },
    state: 'QUEUED',
    created: '2026-01-01T10:00:00Z',
    updated: '2026-01-05T10:00:00Z',
  },
  {
    name: 'r2',
    body: {
      title: 'Alpha',
      skill: 'acme/tools:docs',
      config: { model_id: 'm-b' },
      metadata: { repo: 'web', env: 'dev' },
    },
    state: 'SUCCEEDED',
    created: '2026-01-02T10:00:00Z',
    updated: '2026-01-03T10:00:00Z',
  },
  {
    name: 'r3',
    body: {
      prompt: 'gamma: update the changelog',
      title: 'Bravo',
      config: { name: 'fixer', model_id: 'm-b', environment_id: 'env-2' },
      metadata: { repo: 'api' },
    },
    state: 'FAILED',
    created: '2026-01-03T10:00:00Z',
    updated: '2026-01-04T10:00:00Z',
  },
  {
    name: 'r4',
    body: { prompt: 'delta: Parser 100%_done', title: 'Echo', config: { name: 'fixer', model_id: 'm-a' } },
    state: 'INPROGRESS',
    source: 'WEBHOOK',
    created: '2026-01-04T10:00:00Z',
    updated: '2026-01-02T10:00:00Z',
    other: true,
  },
  {
    name: 'r5',
    body: { prompt: 'epsilon', title: 'Delta', config: { environment_id: 'env-1' } },
    state: 'CANCELLED',
    source: 'FACTORY',
    created: '2026-01-05T10:00:00Z',
    updated: '2026-01-01T10:00:00Z',
  },
];

beforeAll(async () => {
  t = await startTestService();
  const team = await t.newTeam('lists');
  key = team.key;
  otherCreatorKey = await t.newKey([team.team], ['runs:read', 'runs:write'], 'second-creator');
  for (const s of SEEDS) {
    const res = await t.call('POST', '/api/v1/agent/runs', s.body, s.other ? otherCreatorKey : key);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    ids[s.name] = res.body.run_id;
    await t.service.db.execute(
      `UPDATE runs SET state = $2, source = coalesce($3, source), created_at = $4, updated_at = $5 WHERE id = $1`,
      [res.body.run_id, s.state, s.source ?? null, s.created, s.updated],
    );
  }
  creatorUid = (await t.call('GET', `/api/v1/agent/runs/${ids.r1}`, undefined, key)).body.creator.uid;
  otherCreatorUid = (await t.call('GET', `/api/v1/agent/runs/${ids.r4}`, undefined, key)).body.creator.uid;
  // Runs of another team that match every filter: never listed.
  await t.call('POST', '/api/v1/agent/runs', SEEDS[0].body);
  await t.call('POST', '/api/v1/agent/runs', SEEDS[1].body);
});
afterAll(async () => t?.stop());

async function list(query: string, k = key) {
  const res = await t.call('GET', `/api/v1/agent/runs${query ? `?${query}` : ''}`, undefined, k);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body as {
    runs: Array<Record<string, any>>;
    page_info: { has_next_page: boolean; next_cursor?: string };
  };
}

const names = (runs: Array<Record<string, any>>) =>
  runs.map((r) => Object.keys(ids).find((n) => ids[n] === r.run_id) ?? r.run_id);

describe('filters', () => {
  const cases: Array<[string, () => string, string[]]> = [
    ['no filter (updated_at desc)', () => '', ['r1', 'r3', 'r2', 'r4', 'r5']],
    ['state', () => 'state=FAILED', ['r3']],
    ['state repeated (OR)', () => 'state=QUEUED&state=CANCELLED', ['r1', 'r5']],
    ['state comma-separated', () => 'state=QUEUED,INPROGRESS', ['r1', 'r4']],
    ['name', () => 'name=fixer', ['r1', 'r3', 'r4']],
    ['name from a skill', () => 'name=docs', ['r2']],
    ['model_id', () => 'model_id=m-b', ['r3', 'r2']],
    ['creator', () => `creator=${creatorUid}`, ['r1', 'r3', 'r2', 'r5']],
    ['another creator', () => `creator=${otherCreatorUid}`, ['r4']],
    ['source', () => 'source=WEBHOOK', ['r4']],
    // The clients' name for a webhook run selects factoryd's WEBHOOK runs.
    ['source CUSTOM_WEBHOOK', () => 'source=CUSTOM_WEBHOOK', ['r4']],
    ['source CUSTOM_WEBHOOK with another', () => 'source=CUSTOM_WEBHOOK,API', ['r1', 'r3', 'r2', 'r4']],
    // A value of the clients' enum no factoryd run has: accepted, matching nothing.
    ['source MCP', () => 'source=MCP', []],
    ['source API', () => 'source=API', ['r1', 'r3', 'r2']],
    ['environment_id', () => 'environment_id=env-1', ['r1', 'r5']],
    ['environment_id=empty-environment', () => 'environment_id=empty-environment', ['r2', 'r4']],
    ['skill_spec', () => 'skill_spec=acme/tools:docs', ['r2']],
    ['skill (alias)', () => 'skill=acme/tools:docs', ['r2']],
    ['created_after', () => 'created_after=2026-01-03T10:00:00Z', ['r4', 'r5']],
    ['created_before', () => 'created_before=2026-01-03T10:00:00Z', ['r1', 'r2']],
    [
      'created_after + created_before with an offset',
      () =>
        `created_after=${encodeURIComponent('2026-01-02T11:00:00+02:00')}&created_before=2026-01-04T10:00:00Z`,
      ['r3', 'r2'],
    ],
    ['updated_after', () => 'updated_after=2026-01-03T12:00:00.5Z', ['r1', 'r3']],
    ['metadata[key]=value', () => 'metadata[repo]=web', ['r1', 'r2']],
    ['metadata ANDed', () => 'metadata[repo]=web&metadata[env]=dev', ['r2']],
    [
      'five metadata filters',
      () => 'metadata[repo]=web&metadata[env]=prod&metadata[team]=x&metadata[a]=1&metadata[b]=2',
      ['r1'],
    ],
    ['metadata with no match', () => 'metadata[repo]=web&metadata[env]=qa', []],
    ['q in the prompt, any case', () => 'q=PARSER', ['r1', 'r4']],
    ['q in the title', () => 'q=bravo', ['r3']],
    ['q in the skill spec', () => 'q=tools:docs', ['r2']],
    ['q with LIKE wildcards taken literally', () => `q=${encodeURIComponent('100%_')}`, ['r4']],
    ['q % alone matches no run without a %', () => `q=${encodeURIComponent('%')}`, ['r4']],
    ['combined filters', () => 'state=QUEUED&state=FAILED&name=fixer&model_id=m-a', ['r1']],
  ];
  it.each(cases)('%s', async (_name, query, expected) => {
    const page = await list(query());
    expect(names(page.runs)).toEqual(expected);
    expect(page.page_info).toEqual({ has_next_page: false });
  });

  it('ignores an empty cursor and empty q', async () => {
    expect(names((await list('cursor=&q=')).runs)).toEqual(['r1', 'r3', 'r2', 'r4', 'r5']);
  });
});

describe('sorts', () => {
  const cases: Array<[string, string[]]> = [
    ['', ['r1', 'r3', 'r2', 'r4', 'r5']],
    ['sort_by=updated_at&sort_order=asc', ['r5', 'r4', 'r2', 'r3', 'r1']],
    ['sort_by=created_at', ['r5', 'r4', 'r3', 'r2', 'r1']],
    ['sort_by=created_at&sort_order=asc', ['r1', 'r2', 'r3', 'r4', 'r5']],
    ['sort_by=title', ['r4', 'r5', 'r1', 'r3', 'r2']],
    ['sort_by=title&sort_order=asc', ['r2', 'r3', 'r1', 'r5', 'r4']],
  ];
  it.each(cases)('%s', async (query, expected) => {
    expect(names((await list(query)).runs)).toEqual(expected);
    // The same order page by page, two at a time, through the cursor.
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let i = 0; i < 5; i++) {
      const page = await list([query, 'limit=2', cursor ? `cursor=${cursor}` : ''].filter(Boolean).join('&'));
      seen.push(...names(page.runs));
      if (!page.page_info.has_next_page) break;
      cursor = page.page_info.next_cursor;
      expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    }
    expect(seen).toEqual(expected);
  });
});

describe('bad query parameters (400 naming the parameter)', () => {
  const cases: Array<[string, string, RegExp]> = [
    ['limit=0', 'limit', /limit must be a whole number from 1 to 500/],
    ['limit=501', 'limit', /limit must be/],
    ['limit=ten', 'limit', /limit must be/],
    ['limit=-1', 'limit', /limit must be/],
    ['limit=1&limit=2', 'limit', /given once/],
    ['sort_by=name', 'sort_by', /sort_by must be one of updated_at, created_at, title/],
    ['sort_order=up', 'sort_order', /sort_order must be asc or desc/],
    ['state=RUNNING', 'state', /state must be one of QUEUED/],
    ['state=queued', 'state', /state must be one of/],
    ['source=EMAIL', 'source', /source must be one of/],
    ['created_after=yesterday', 'created_after', /RFC 3339/],
    ['created_before=2026-02-30T00:00:00Z', 'created_before', /RFC 3339/],
    ['updated_after=2026-01-01', 'updated_after', /RFC 3339/],
    ['updated_after=2026-01-01T24:00:00Z', 'updated_after', /RFC 3339/],
    [`created_after=${encodeURIComponent('2026-01-01T00:00:00+99:00')}`, 'created_after', /RFC 3339/],
    [
      'metadata[a]=1&metadata[b]=2&metadata[c]=3&metadata[d]=4&metadata[e]=5&metadata[f]=6',
      'metadata',
      /at most 5/,
    ],
    [`${encodeURIComponent('metadata[bad key]')}=1`, 'metadata[bad key]', /must match/],
    ['cursor=not*a*cursor', 'cursor', /not a cursor issued by this server/],
    [`cursor=${Buffer.from('{"x":1}').toString('base64url')}`, 'cursor', /not a cursor issued/],
    [
      `cursor=${Buffer.from(JSON.stringify(['runs:updated_at:desc', "x'); DROP TABLE runs; --", 'abc'])).toString('base64url')}`,
      'cursor',
      /not a cursor issued/,
    ],
    ['q=' + 'x'.repeat(201), 'q', /q must be at most 200/],
  ];
  it.each(cases)('%s', async (query, param, rule) => {
    const res = await t.call('GET', `/api/v1/agent/runs?${query}`, undefined, key);
    expect(res.status, JSON.stringify(res.body)).toBe(400);
    expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(res.body.error).toBe('invalid_request');
    expect(res.body.detail).toMatch(rule);
    expect(res.body.invalid_params).toEqual([{ name: param, reason: expect.stringMatching(rule) }]);
  });

  it('refuses a cursor made for another sort', async () => {
    const page = await list('limit=1&sort_by=created_at');
    const res = await t.call(
      'GET',
      `/api/v1/agent/runs?limit=1&sort_by=title&cursor=${page.page_info.next_cursor}`,
      undefined,
      key,
    );
    expect(res.status).toBe(400);
    expect(res.body.detail).toMatch(/different sort order/);
    const asc = await t.call(
      'GET',
      `/api/v1/agent/runs?limit=1&sort_by=created_at&sort_order=asc&cursor=${page.page_info.next_cursor}`,
      undefined,
      key,
    );
    expect(asc.status).toBe(400);
  });
});

describe('pagination', () => {
  it('keeps ties apart by id and holds microseconds across pages', async () => {
    const team = await t.newTeam('ties');
    const made: string[] = [];
    for (let i = 0; i < 12; i++) {
      const res = await t.call('POST', '/api/v1/agent/runs', { prompt: `tie ${i}`, title: 'Same' }, team.key);
      made.push(res.body.run_id);
    }
    // Half share one timestamp exactly; the rest differ by a microsecond.
    await t.service.db.execute(
      `UPDATE runs SET updated_at = '2026-03-01T00:00:00.000001Z', created_at = '2026-03-01T00:00:00Z' WHERE id = ANY($1)`,
      [made.slice(0, 6)],
    );
    for (let i = 6; i < 12; i++) {
      await t.service.db.execute(
        `UPDATE runs SET updated_at = $2::timestamptz + $3 * interval '1 microsecond' WHERE id = $1`,
        [made[i], '2026-03-01T00:00:00.000001Z', i - 5],
      );
    }
    for (const sort of [
      '',
      'sort_by=created_at&sort_order=asc',
      'sort_by=title',
      'sort_by=title&sort_order=asc',
    ]) {
      const seen: string[] = [];
      let cursor: string | undefined;
      do {
        const page = await list(
          [sort, 'limit=5', cursor ? `cursor=${cursor}` : ''].filter(Boolean).join('&'),
          team.key,
        );
        seen.push(...page.runs.map((r) => r.run_id));
        cursor = page.page_info.next_cursor;
      } while (cursor);
      expect(seen.length, sort).toBe(12);
      expect(new Set(seen).size, sort).toBe(12);
    }
  });

  it('skips and repeats no run while others are inserted concurrently', async () => {
    const team = await t.newTeam('concurrent');
    const initial = new Set<string>();
    for (let i = 0; i < 60; i++) {
      const res = await t.call(
        'POST',
        '/api/v1/agent/runs',
        { prompt: `run ${i}`, title: `t${(i * 37) % 60}` },
        team.key,
      );
      initial.add(res.body.run_id);
    }
    for (const sort of [
      '',
      'sort_by=created_at&sort_order=asc',
      'sort_by=created_at',
      'sort_by=title&sort_order=asc',
    ]) {
      let inserting = true;
      let inserted = 0;
      const writer = (async () => {
        while (inserting) {
          await t.call(
            'POST',
            '/api/v1/agent/runs',
            { prompt: 'late', title: `t${inserted % 60}` },
            team.key,
          );
          inserted++;
        }
      })();
      const seen: string[] = [];
      let cursor: string | undefined;
      try {
        do {
          const page = await list(
            [sort, 'limit=7', cursor ? `cursor=${cursor}` : ''].filter(Boolean).join('&'),
            team.key,
          );
          seen.push(...page.runs.map((r) => r.run_id));
          cursor = page.page_info.next_cursor;
          // A run inserted between any two pages over the initial runs (past them, the reader
          // outruns the writer and the listing ends).
          const before = inserted;
          if (seen.length < initial.size)
            await eventually(() => inserted > before, 'a run inserted between two pages');
        } while (cursor);
      } finally {
        inserting = false;
        await writer;
      }
      expect(inserted, 'the writer really ran alongside').toBeGreaterThan(0);
      expect(new Set(seen).size, `no run repeated (${sort})`).toBe(seen.length);
      for (const id of initial) expect(seen, `run ${id} listed (${sort})`).toContain(id);
    }
  });
});

describe('plans and limits', () => {
  // A prepared statement may settle after five calls on PostgreSQL's generic plan, one plan for every
  // value; for a filter value that matches nothing that plan walked every run of the team (`q` with
  // no match: 20 s at 10M runs). A filtered page must therefore never be a prepared statement.
  it('plans a filtered page for its values every time and prepares an unfiltered one', async () => {
    const prepared = await statementsPreparedBy(t.databaseUrl, async (db) => {
      const repo = new RunListRepository(db);
      const [{ id: teamId }] = await db.query<{ id: string }>(
        `SELECT team_id AS id FROM runs WHERE id = $1`,
        [ids.r1],
      );
      const page = (query: string) => repo.page(teamId, parseRunListQuery(QueryParams.parse(query)));
      const filtered = ['q=zzzz', 'metadata[repo]=nowhere', 'automation_id=none', 'state=FAILED'];
      for (let i = 0; i < 7; i++) {
        expect((await page('')).runs).toHaveLength(5);
        for (const query of filtered)
          expect((await page(query)).runs).toHaveLength(query === 'state=FAILED' ? 1 : 0);
      }
    });
    // The unfiltered page only: the check sees what was prepared.
    expect(prepared.filter((s) => s.includes('sort_key'))).toEqual([
      expect.stringMatching(/WHERE r\.team_id = \$1\s+ORDER BY/),
    ]);
  });

  it('stops a page that runs past its limit with a 503 and Retry-After, and serves the next one', async () => {
    // Unfiltered (a prepared statement) and filtered (planned for its values): both are bounded.
    const stopped = await whileLocked(t.databaseUrl, 'runs', () =>
      Promise.all(['', '?state=FAILED'].map((q) => t.call('GET', `/api/v1/agent/runs${q}`, undefined, key))),
    );
    for (const res of stopped) {
      expect(res.status, JSON.stringify(res.body)).toBe(503);
      expect(res.headers.get('retry-after')).toBe('2');
      expect(res.body).toMatchObject({ error: 'service_unavailable', retryable: true });
      expect(res.body.detail).toMatch(/took longer than 2 s and was stopped/);
    }
    // The connections went back clean: no statement_timeout left on them, no transaction open.
    expect(names((await list('')).runs)).toEqual(['r1', 'r3', 'r2', 'r4', 'r5']);
    expect(names((await list('state=FAILED')).runs)).toEqual(['r3']);
    const [setting] = await t.service.db.query<{ statement_timeout: string }>(`SHOW statement_timeout`);
    expect(setting.statement_timeout).toBe('0');
  });
});
