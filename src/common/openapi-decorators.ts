import { readFileSync } from 'node:fs';
import { applyDecorators } from '@nestjs/common';
import { ApiQuery, ApiResponse } from '@nestjs/swagger';
import type { ApiSchemaName } from '../contract/generated.js';
import { fromRoot } from './paths.js';

/**
 * OpenAPI annotations that point at the JSON Schemas under `schemas/` (published as
 * `#/components/schemas/<$id>`), so the document and the request validation share one source.
 */
export const schemaRef = (id: string) => ({ $ref: `#/components/schemas/${id}` });

const PROBLEM_DESCRIPTIONS: Record<number, string> = {
  400: 'Invalid request: `invalid_params` names each bad field or parameter',
  401: 'Missing, unknown or revoked API key',
  403: 'The key lacks the scope, or is not a member of the team in X-Team-Uid',
  404: 'No such resource in the caller’s team',
  409: 'Conflict with the resource’s state; `retryable` says whether to retry',
  429: 'The team has TEAM_MAX_QUEUED_RUNS runs queued; retry after `Retry-After` seconds',
  500: 'Internal error; the body names only the trace id',
  503: 'Not now: the database is out of reach, or the work took longer than its limit; retry after `Retry-After` seconds',
};

/** One error response as RFC 7807 problem+json (`Problem`). */
export const ApiProblem = (status: number, description = PROBLEM_DESCRIPTIONS[status] ?? 'Error') =>
  ApiResponse({
    status,
    description,
    content: { 'application/problem+json': { schema: schemaRef('Problem') } },
  });

/** Error responses of a route that takes an API key: 400, 401 and 500 apply to every such route. */
export function ApiProblems(...statuses: number[]): MethodDecorator & ClassDecorator {
  const all = [...new Set([400, 401, 500, ...statuses])].sort();
  return applyDecorators(...all.map((status) => ApiProblem(status)));
}

/** A 200 JSON response of the schema `$id` (or an inline schema). */
export const ApiJsonOk = (schema: string | Record<string, unknown>, description = 'OK') =>
  ApiResponse({
    status: 200,
    description,
    content: { 'application/json': { schema: typeof schema === 'string' ? schemaRef(schema) : schema } },
  });

/**
 * A route's query parameters from an object schema of schemas/api (`RunListQuery`): one parameter per
 * property, with its schema and description; a list is repeated (`state=A&state=B`), a map is
 * `key[name]=value`. The schema is then the one list of the parameters the CLI and the dashboard type
 * their queries with (src/contract).
 */
export function ApiQueryParams(id: ApiSchemaName): MethodDecorator {
  const file = `${id.replace(/([a-z0-9])([A-Z])/g, '$1-$2').toLowerCase()}.schema.json`;
  const schema = JSON.parse(readFileSync(fromRoot('schemas', 'api', file), 'utf8')) as {
    properties: Record<string, Record<string, unknown>>;
    required?: string[];
  };
  // `$ref: "RunState"` (by $id, as ajv reads it) is the published component.
  const published = (node: Record<string, unknown>) =>
    JSON.parse(JSON.stringify(node), (k, v) => (k === '$ref' ? schemaRef(v as string).$ref : v)) as Record<
      string,
      unknown
    >;
  return applyDecorators(
    ...Object.entries(schema.properties).map(([name, property]) => {
      const { description, ...rest } = published(property);
      const style =
        rest.type === 'array'
          ? { style: 'form' as const, explode: true }
          : rest.type === 'object'
            ? { style: 'deepObject' as const, explode: true }
            : {};
      return ApiQuery({
        name,
        required: schema.required?.includes(name) ?? false,
        ...(typeof description === 'string' ? { description } : {}),
        schema: rest,
        ...style,
      });
    }),
  );
}
