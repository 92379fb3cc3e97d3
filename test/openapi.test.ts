import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OPERATIONS } from '../src/contract/client.js';
import { startTestService, type TestService } from './support/service.js';

/** /api/v1/openapi.json lists every route the server has, and every reference in it resolves. */
let t: TestService;
let doc: any;
beforeAll(async () => {
  t = await startTestService();
  const res = await fetch(`${t.api}/openapi.json`);
  expect(res.status).toBe(200);
  doc = await res.json();
});
afterAll(async () => t?.stop());

/** `/api/v1/agent/runs/:runId` → `/api/v1/agent/runs/{runId}` */
const openApiPath = (url: string) => url.replace(/:([A-Za-z0-9_]+)/g, '{$1}');

/** Every operation of the document, as `GET /path`, its path and method, and the operation. */
const operations = () =>
  Object.entries<Record<string, any>>(doc.paths).flatMap(([path, ops]) =>
    Object.entries<any>(ops).map(([method, op]) => ({
      where: `${method.toUpperCase()} ${path}`,
      path,
      method,
      op,
    })),
  );

/** The public routes that take a key when one is sent, and with it the team it picks. */
const OPTIONAL_KEY = [
  'GET /api/v1/agent/artifacts/{artifactUid}/download',
  'GET /api/v1/agent/sessions/{sessionUuid}/redirect',
  'GET /api/v1/agent/conversations/{conversationId}/redirect',
];

describe('OpenAPI document', () => {
  it('is OpenAPI 3.1 with bearer auth', () => {
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.components.securitySchemes.bearer).toMatchObject({ type: 'http', scheme: 'bearer' });
  });

  it('names its server, and gives every operation a summary, its security and its client errors', () => {
    expect(doc.servers).toEqual([{ url: '/', description: expect.any(String) }]);
    for (const { where, op } of operations()) {
      expect(op.summary, where).toEqual(expect.stringMatching(/\S/));
      // `[]` (public) or the bearer scheme with the one scope the route requires.
      expect(op.security, where).toSatisfy(
        (s: unknown) =>
          JSON.stringify(s) === '[]' || /^\[\{"bearer":\["[a-z:]+"\]\}\]$/.test(JSON.stringify(s)),
      );
      // Only a public operation that takes no input has no client error to declare (redocly's
      // operation-4xx-response is ignored for exactly those: .redocly.lint-ignore.yaml).
      const takesInput = op.security.length > 0 || op.parameters?.length > 0 || op.requestBody;
      if (takesInput)
        expect(
          Object.keys(op.responses).filter((s) => /^4/.test(s)),
          where,
        ).not.toEqual([]);
    }
  });

  it('declares security as the server enforces it: without a key, a public operation answers, any other 401', async () => {
    const sample: Record<string, string> = {
      uid: 'A'.repeat(22),
      runId: '00000000-0000-4000-8000-000000000000',
      id: '00000000-0000-4000-8000-000000000000',
      file: 'webhook.schema.json',
      token: 't',
    };
    const wrong: string[] = [];
    for (const { where, path, method, op } of operations()) {
      const res = await fetch(`${t.url}${path.replace(/\{(\w+)\}/g, (_, p: string) => sample[p])}`, {
        method: method.toUpperCase(),
        ...(method === 'get' ? {} : { headers: { 'content-type': 'application/json' }, body: '{}' }),
      });
      await res.arrayBuffer();
      // Declared public (`[]`) and answered, or declared with a scope and refused.
      const declared = res.status === 401 ? op.security?.length > 0 : op.security?.length === 0;
      if (!declared) wrong.push(`${where} → ${res.status}`);
    }
    expect(wrong).toEqual([]);
  });

  it('names the team headers on every operation whose key they pick a team for, and on no other', () => {
    const wrong: string[] = [];
    for (const { where, op } of operations()) {
      const headers = (op.parameters ?? [])
        .filter((p: { in: string }) => p.in === 'header')
        .map((p: { name: string }) => p.name);
      const picked = headers.filter((h: string) => /^X-(Warp-)?Team-Uid$/.test(h)).sort();
      // A route with a scope authenticates through ApiEdge, which reads them, and so do the public
      // routes that also take a key (agent.controller.ts, optionalAuth); the key's own route answers
      // for every team of the key.
      const reads =
        (op.security.length > 0 && where !== 'GET /api/v1/api-key') || OPTIONAL_KEY.includes(where);
      if (JSON.stringify(picked) !== JSON.stringify(reads ? ['X-Team-Uid', 'X-Warp-Team-Uid'] : []))
        wrong.push(`${where}: ${picked.join(', ') || 'none'}`);
    }
    expect(wrong).toEqual([]);
  });

  it('uses every component it publishes', () => {
    const text = JSON.stringify(doc.paths) + JSON.stringify(doc.components.schemas);
    const unused = Object.keys(doc.components.schemas).filter(
      (name) => !text.includes(`"#/components/schemas/${name}"`),
    );
    expect(unused).toEqual([]);
  });

  it('is the document CI lints, built without a database (npm run lint:openapi)', async () => {
    const { openApiWithoutDatabase } = await import('../src/openapi.js');
    expect(JSON.parse(JSON.stringify(await openApiWithoutDatabase()))).toEqual(doc);
  });

  it('documents every route Fastify registered (no route can be forgotten)', () => {
    const registered = t.service.routes.filter((r) => r.method !== 'HEAD' && r.method !== 'OPTIONS');
    expect(registered.length).toBeGreaterThan(5);
    const missing = registered.filter((r) => !doc.paths[openApiPath(r.url)]?.[r.method.toLowerCase()]);
    expect(missing).toEqual([]);
    // And the document names no route the server lacks.
    const documented = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.keys(ops as object).map((m) => `${m.toUpperCase()} ${path}`),
    );
    const served = new Set(registered.map((r) => `${r.method} ${openApiPath(r.url)}`));
    expect(documented.filter((d) => !served.has(d))).toEqual([]);
  });

  it('gives every /api/v1 operation a success response, problem+json errors and its tags', () => {
    for (const [path, ops] of Object.entries<Record<string, any>>(doc.paths)) {
      if (!path.startsWith('/api/v1/agent')) continue;
      for (const [method, op] of Object.entries<any>(ops)) {
        const where = `${method.toUpperCase()} ${path}`;
        // 200 JSON or a live stream (Server-Sent Events), or 201 JSON (a create), 202 JSON (accepted:
        // an interrupt), or 204 (a delete); a download is its file's own type, and the transcript a
        // 302 to its download.
        const success =
          op.responses['200'] ?? op.responses['201'] ?? op.responses['202'] ?? op.responses['204'];
        if (path.endsWith('/transcript')) expect(op.responses['302'], where).toBeDefined();
        else expect(success, where).toBeDefined();
        if (success && !op.responses['204'] && !path.endsWith('/download'))
          expect(
            success.content?.['application/json']?.schema ?? success.content?.['text/event-stream']?.schema,
            where,
          ).toBeDefined();
        // A public operation (security: []) takes no key, so it has no 401.
        const errors = op.security?.length === 0 ? ['500'] : ['400', '401', '500'];
        for (const status of errors) {
          expect(
            op.responses[status]?.content?.['application/problem+json']?.schema,
            `${where} ${status}`,
          ).toEqual({
            $ref: '#/components/schemas/Problem',
          });
        }
        expect(op.tags, where).toEqual(expect.arrayContaining([expect.stringMatching(/^(Runs|Agents)$/)]));
        expect(op.security ?? doc.security, where).toBeDefined();
      }
    }
  });

  it('names the scope each operation needs; the worker API needs a worker key', () => {
    expect(doc.paths['/api/v1/agent/runs'].post.security).toEqual([{ bearer: ['runs:write'] }]);
    expect(doc.paths['/api/v1/agent/runs'].get.security).toEqual([{ bearer: ['runs:read'] }]);
    const workerOps = Object.entries<Record<string, any>>(doc.paths).filter(([p]) =>
      p.startsWith('/api/v1/agent/workers/'),
    );
    expect(workerOps.length).toBeGreaterThanOrEqual(7);
    for (const [path, ops] of workerOps)
      for (const op of Object.values<any>(ops)) expect(op.security, path).toEqual([{ bearer: ['workers'] }]);
    expect(doc.components.securitySchemes.bearer.description).toMatch(/`workers`/);
  });

  it('points request bodies and responses at the JSON Schemas that validate them', () => {
    const create = doc.paths['/api/v1/agent/runs'].post;
    expect(create.requestBody.content['application/json'].schema).toEqual({
      $ref: '#/components/schemas/RunCreateRequest',
    });
    expect(create.responses['200'].content['application/json'].schema.$ref).toBe(
      '#/components/schemas/RunCreateResponse',
    );
    expect(doc.paths['/api/v1/agent/run'].post.requestBody.content['application/json'].schema.$ref).toBe(
      '#/components/schemas/RunCreateRequest',
    );
    const list = doc.paths['/api/v1/agent/runs'].get;
    expect(list.responses['200'].content['application/json'].schema.$ref).toBe(
      '#/components/schemas/RunListResponse',
    );
    const params = list.parameters.map((p: { name: string }) => p.name).sort();
    for (const name of [
      'limit',
      'cursor',
      'sort_by',
      'sort_order',
      'state',
      'name',
      'model_id',
      'creator',
      'source',
      'environment_id',
      'skill_spec',
      'skill',
      'created_after',
      'created_before',
      'updated_after',
      'metadata',
      'q',
    ]) {
      expect(params).toContain(name);
    }
    expect(
      doc.paths['/api/v1/agent/runs/{runId}/followups'].post.requestBody.content['application/json'].schema
        .$ref,
    ).toBe('#/components/schemas/RunFollowupRequest');
    expect(
      doc.paths['/api/v1/agent/runs/{runId}/cancel'].post.responses['200'].content['application/json'].schema,
    ).toMatchObject({ type: 'string' });
    expect(
      doc.paths['/api/v1/agent/runs/{runId}'].get.responses['200'].content['application/json'].schema.$ref,
    ).toBe('#/components/schemas/RunItem');
  });

  it('has every operation of the typed client (src/contract/client.ts), with its body and answer schemas', () => {
    for (const [name, op] of Object.entries(OPERATIONS)) {
      const found = doc.paths[`/api/v1${op.path}`]?.[op.method.toLowerCase()];
      expect(found, `${name}: ${op.method} ${op.path}`).toBeDefined();
      const body = 'body' in op ? op.body : undefined;
      expect(found.requestBody?.content['application/json'].schema.$ref, `${name}'s body`).toBe(
        body && `#/components/schemas/${body}`,
      );
      const success = Object.entries<any>(found.responses).find(([status]) => status.startsWith('2'))!;
      const answer = success[1].content?.['application/json']?.schema;
      if (op.response === 'string') expect(answer, `${name}'s answer`).toMatchObject({ type: 'string' });
      else expect(answer?.$ref, `${name}'s answer`).toBe(`#/components/schemas/${op.response}`);
    }
  });

  it('documents the run filters from RunListQuery with the values the parser takes', async () => {
    const { TASK_STATUSES } = await import('../src/runs/run-list.js');
    const { ARTIFACT_TYPES } = await import('../src/runs/artifact.js');
    const params = new Map<string, any>(
      doc.paths['/api/v1/agent/runs'].get.parameters.map((p: any) => [p.name, p]),
    );
    expect(params.get('task_status').schema.items.enum).toEqual([...TASK_STATUSES]);
    expect(params.get('artifact_type').schema.enum).toEqual([...ARTIFACT_TYPES]);
    expect(params.get('state')).toMatchObject({ style: 'form', explode: true });
    expect(params.get('state').schema.items.$ref).toBe('#/components/schemas/RunState');
    expect(params.get('metadata')).toMatchObject({ style: 'deepObject', explode: true });
  });

  it('resolves every $ref', () => {
    const refs: string[] = [];
    const walk = (node: unknown) => {
      if (Array.isArray(node)) node.forEach(walk);
      else if (node && typeof node === 'object') {
        for (const [k, v] of Object.entries(node)) {
          if (k === '$ref') refs.push(String(v));
          else walk(v);
        }
      }
    };
    walk(doc);
    expect(refs.length).toBeGreaterThan(10);
    const unresolved = refs.filter((ref) => {
      if (!ref.startsWith('#/')) return true;
      let node: any = doc;
      for (const part of ref.slice(2).split('/')) node = node?.[part.replace(/~1/g, '/').replace(/~0/g, '~')];
      return node === undefined;
    });
    expect([...new Set(unresolved)]).toEqual([]);
  });

  it('describes what the server really returns (RunItem, RunListResponse, the conversation, the key)', async () => {
    const { SchemaRegistry } = await import('../src/common/schema-validator.js');
    const registry = new SchemaRegistry();
    const created = await t.call('POST', '/api/v1/agent/runs', {
      prompt: 'checked against the schema',
      metadata: { k: 'v' },
      config: { name: 'n', mcp_servers: { a: { url: 'https://x.example' } } },
    });
    expect(registry.check('RunCreateResponse', created.body)).toEqual([]);
    const item = await t.call('GET', `/api/v1/agent/runs/${created.body.run_id}`);
    expect(registry.check('RunItem', item.body)).toEqual([]);
    const list = await t.call('GET', '/api/v1/agent/runs?limit=1');
    expect(registry.check('RunListResponse', list.body)).toEqual([]);
    const conversation = await t.call('GET', `/api/v1/agent/runs/${created.body.run_id}/conversation`);
    // A queued run's: its messages' shape is checked where a run has some (test/skills.test.ts).
    expect(registry.check('RunConversationResponse', conversation.body)).toEqual([]);
    expect(registry.check('ApiKeyInfo', (await t.call('GET', '/api/v1/api-key')).body)).toEqual([]);
    const problem = await t.call('GET', '/api/v1/agent/runs?limit=0');
    expect(registry.check('Problem', problem.body)).toEqual([]);
  });
});
