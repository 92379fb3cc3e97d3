import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { DocumentBuilder, SwaggerModule, type OpenAPIObject } from '@nestjs/swagger';
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
    .addBearerAuth()
    .build();
  const doc = SwaggerModule.createDocument(app, config);
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
  return doc;
}

/** The registry's schemas with `$ref: "Name"` rewritten to `#/components/schemas/Name`. */
function componentSchemas(schemas: Record<string, Record<string, unknown>>): Record<string, object> {
  const ids = new Set(Object.keys(schemas));
  const rewrite = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(rewrite);
    if (node && typeof node === 'object') {
      const out: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(node)) {
        if (k === '$schema' || k === '$id') continue;
        out[k] =
          k === '$ref' && typeof v === 'string' && ids.has(v) ? `#/components/schemas/${v}` : rewrite(v);
      }
      return out;
    }
    return node;
  };
  return Object.fromEntries(Object.entries(schemas).map(([id, s]) => [id, rewrite(s) as object]));
}

export function installOpenApi(app: NestFastifyApplication): void {
  let doc: OpenAPIObject | undefined;
  app
    .getHttpAdapter()
    .getInstance()
    .get(OPENAPI_PATH, async () => (doc ??= buildOpenApi(app)));
}
