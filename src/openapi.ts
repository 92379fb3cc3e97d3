import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import { DocumentBuilder, SwaggerModule, type OpenAPIObject } from '@nestjs/swagger';
import pg from 'pg';
import { DataSource } from 'typeorm';
import { AppModule } from './app.module.js';
import { PUBLIC_EXTENSION, SCOPE_EXTENSION } from './auth/auth.guard.js';
import { SchemaRegistry } from './common/schema-validator.js';
import { CONFIG, type Config, loadConfig } from './config/config.js';
import { Database } from './database/database.js';

const OPENAPI_PATH = '/api/v1/openapi.json';

/**
 * OpenAPI 3.1 at /api/v1/openapi.json: routes from the controllers (@nestjs/swagger), schemas from
 * `schemas/` — the same documents that validate requests, so the two cannot drift.
 */
export function buildOpenApi(app: NestFastifyApplication): OpenAPIObject {
  const config = new DocumentBuilder()
    .setTitle('factoryd')
    .setDescription('Run API (Oz-compatible), factories, webhooks. Errors are RFC 7807 problem+json.')
    .setVersion('1')
    .setLicense('Apache-2.0', 'https://www.apache.org/licenses/LICENSE-2.0')
    // Paths are absolute (`/api/v1/…`): the server is the service's root, PUBLIC_BASE_URL when it is
    // configured, else the host that served this document (a relative URL).
    .addServer(app.get<Config>(CONFIG).publicBaseUrl ?? '/', 'This factoryd')
    .addBearerAuth({
      type: 'http',
      scheme: 'bearer',
      description:
        'An API key (`fdk_…`). Each operation names the scope it needs in its `security`: `runs:read`, ' +
        '`runs:write`, `factory:manage`, or `workers` — a worker key, bound to one `worker_host` and with ' +
        'no other scope, the only key the self-hosted worker API (`/agent/workers/*`) takes.',
    })
    .build();
  const doc = SwaggerModule.createDocument(app, config);
  // The scope a route requires (RequireScope) is its security requirement (OpenAPI 3.1 lets a
  // non-OAuth scheme list the roles it needs); a @Public() route requires none (`security: []`).
  for (const ops of Object.values(doc.paths))
    for (const op of Object.values(ops) as Array<Record<string, unknown>>) {
      const scope = op?.[SCOPE_EXTENSION];
      if (typeof scope === 'string') op.security = [{ bearer: [scope] }];
      else if (op?.[PUBLIC_EXTENSION]) op.security = [];
      delete op?.[PUBLIC_EXTENSION];
    }
  doc.openapi = '3.1.0';
  const schemas = app.get(SchemaRegistry).schemas;
  doc.components ??= {};
  doc.components.schemas = { ...doc.components.schemas, ...componentSchemas(schemas, doc.paths) };
  // This document itself is served by Fastify directly (not a controller route).
  doc.paths[OPENAPI_PATH] = {
    get: {
      operationId: 'openapi',
      summary: 'This OpenAPI 3.1 document',
      tags: ['Operations'],
      security: [],
      responses: {
        200: { description: 'OK', content: { 'application/json': { schema: { type: 'object' } } } },
      },
    },
  };
  for (const path of ['/webhooks/w/{uid}', '/webhooks/w/{uid}/{token}'])
    doc.paths[path] = { post: ingressOperation(path) as unknown as OpenAPIObject['paths'][string]['post'] };
  return doc;
}

/** Webhook ingress is served by Fastify directly (it reads the raw body as a stream). */
function ingressOperation(path: string): Record<string, unknown> {
  const problem = (description: string) => ({
    description,
    content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } },
  });
  return {
    operationId: path.includes('{token}') ? 'webhookIngressUrlToken' : 'webhookIngress',
    summary: 'Deliver an event to a custom webhook',
    description:
      'Any JSON body up to 262,144 bytes; Content-Type is not enforced. Authenticated by bearer token, URL token ' +
      'or the provider signature, per the webhook. Other methods answer 405 with `Allow: POST`.',
    tags: ['Webhook ingress'],
    security: [],
    parameters: [
      { name: 'uid', in: 'path', required: true, schema: { type: 'string', pattern: '^[A-Za-z0-9]{22}$' } },
      ...(path.includes('{token}')
        ? [{ name: 'token', in: 'path', required: true, schema: { type: 'string' } }]
        : []),
    ],
    requestBody: { required: true, content: { '*/*': { schema: {} } } },
    responses: {
      202: {
        description: 'Accepted (or a duplicate of an accepted delivery)',
        content: {
          'application/json': {
            schema: {
              type: 'object',
              required: ['delivery_id'],
              properties: { delivery_id: { type: 'string' } },
            },
          },
        },
      },
      400: problem('The body is not valid JSON'),
      401: problem('Missing or wrong credential or signature'),
      404: problem('Unknown, disabled or deleted webhook'),
      413: problem('Body over 262,144 bytes'),
      429: problem('Too many failed authentications or deliveries; see Retry-After'),
    },
  };
}

/**
 * The registry's schemas that the operations use, as components: `$ref: "Name"` becomes
 * `#/components/schemas/Name`. A ref to a part of a schema (`Name#/properties/x`, or a schema's own
 * `#/$defs/x`) becomes a component of its own (`Name.properties.x`): every component is then used
 * whole, and a schema that only lends parts (the definition file `WebhookFile`) is not published.
 */
function componentSchemas(
  schemas: Record<string, Record<string, unknown>>,
  paths: OpenAPIObject['paths'],
): Record<string, object> {
  const components: Record<string, object> = {};
  const pending: Array<{ name: string; owner: string; node: unknown }> = [];
  const use = (owner: string, segments: string[]): string => {
    const name = [owner, ...segments.map((s) => s.replace(/^\$/, ''))].join('.');
    if (!(name in components)) {
      components[name] = {};
      pending.push({ name, owner, node: segments.reduce<any>((n, s) => n?.[s], schemas[owner]) });
    }
    return `#/components/schemas/${name}`;
  };
  const target = (ref: string, owner: string) => {
    const [id, pointer = ''] = ref.split('#');
    const schema = id === '' ? owner : id;
    if (!(schema in schemas)) return ref;
    const segments = pointer.split('/').filter(Boolean);
    return use(
      schema,
      segments.map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~')),
    );
  };
  const rewrite = (node: unknown, owner: string, root = false): unknown => {
    if (Array.isArray(node)) return node.map((n) => rewrite(n, owner));
    if (node && typeof node === 'object') {
      const out: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(node)) {
        // $defs are published as components of their own (above).
        if (k === '$schema' || k === '$id' || (root && k === '$defs')) continue;
        out[k] = k === '$ref' && typeof v === 'string' ? target(v, owner) : rewrite(v, owner);
      }
      return out;
    }
    return node;
  };
  // The operations name schemas by component (schemaRef): those are the roots.
  JSON.stringify(paths, (k, v) => {
    const id = k === '$ref' && typeof v === 'string' && /^#\/components\/schemas\/([^/]+)$/.exec(v)?.[1];
    if (id && id in schemas) use(id, []);
    return v;
  });
  for (let next = pending.shift(); next; next = pending.shift())
    components[next.name] = rewrite(next.node, next.owner, next.name === next.owner) as object;
  return components;
}

/**
 * The document as the service serves it, from the modules alone (CI lints it: npm run lint:openapi).
 * Nest constructs the controllers and their providers but starts nothing (no lifecycle hook runs
 * before init), so a pool that never connects stands in for the database.
 */
export async function openApiWithoutDatabase(): Promise<OpenAPIObject> {
  const config = loadConfig({ DATABASE_URL: 'postgres://unused@127.0.0.1:1/unused', LOG_LEVEL: 'silent' });
  const db = new Database(
    new pg.Pool({ connectionString: config.databaseUrl }),
    new DataSource({ type: 'postgres', url: config.databaseUrl }),
  );
  const app = await NestFactory.create<NestFastifyApplication>(
    AppModule.forRoot(config, db),
    new FastifyAdapter(),
    { logger: false },
  );
  try {
    return buildOpenApi(app);
  } finally {
    await app.close();
  }
}

export function installOpenApi(app: NestFastifyApplication): void {
  let doc: OpenAPIObject | undefined;
  app
    .getHttpAdapter()
    .getInstance()
    .get(OPENAPI_PATH, async () => (doc ??= buildOpenApi(app)));
}
