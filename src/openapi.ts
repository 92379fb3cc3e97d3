import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { DocumentBuilder, SwaggerModule, type OpenAPIObject } from '@nestjs/swagger';
import { SCOPE_EXTENSION } from './auth/auth.guard.js';
import { SchemaRegistry } from './common/schema-validator.js';

export const OPENAPI_PATH = '/api/v1/openapi.json';

/**
 * OpenAPI 3.1 at /api/v1/openapi.json: routes from the controllers (@nestjs/swagger), schemas from
 * `schemas/` — the same documents that validate requests, so the two cannot drift.
 */
export function buildOpenApi(app: NestFastifyApplication): OpenAPIObject {
  const config = new DocumentBuilder()
    .setTitle('factoryd')
    .setDescription('Run API (Oz-compatible), factories, webhooks. Errors are RFC 7807 problem+json.')
    .setVersion('1')
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
  // non-OAuth scheme list the roles it needs).
  for (const ops of Object.values(doc.paths))
    for (const op of Object.values(ops) as Array<Record<string, unknown>>) {
      const scope = op?.[SCOPE_EXTENSION];
      if (typeof scope === 'string') op.security = [{ bearer: [scope] }];
    }
  doc.openapi = '3.1.0';
  const schemas = app.get(SchemaRegistry).schemas;
  doc.components ??= {};
  doc.components.schemas = { ...doc.components.schemas, ...componentSchemas(schemas) };
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

/** The registry's schemas with `$ref: "Name"` rewritten to `#/components/schemas/Name`. */
function componentSchemas(schemas: Record<string, Record<string, unknown>>): Record<string, object> {
  const ids = new Set(Object.keys(schemas));
  // A schema's own `#/$defs/x` points into that schema, which now lives under components; so does
  // another schema's `Name#/$defs/x`.
  const target = (ref: string, owner: string) => {
    const [id, pointer] = ref.split('#');
    if (id === '') return `#/components/schemas/${owner}${pointer}`;
    return ids.has(id) ? `#/components/schemas/${id}${pointer ?? ''}` : ref;
  };
  const rewrite = (node: unknown, owner: string): unknown => {
    if (Array.isArray(node)) return node.map((n) => rewrite(n, owner));
    if (node && typeof node === 'object') {
      const out: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(node)) {
        if (k === '$schema' || k === '$id') continue;
        out[k] = k === '$ref' && typeof v === 'string' ? target(v, owner) : rewrite(v, owner);
      }
      return out;
    }
    return node;
  };
  return Object.fromEntries(Object.entries(schemas).map(([id, s]) => [id, rewrite(s, id) as object]));
}

export function installOpenApi(app: NestFastifyApplication): void {
  let doc: OpenAPIObject | undefined;
  app
    .getHttpAdapter()
    .getInstance()
    .get(OPENAPI_PATH, async () => (doc ??= buildOpenApi(app)));
}
