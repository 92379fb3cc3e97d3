import type { ApiSchemaName, ApiSchemas } from './generated.js';

/**
 * The API operations the CLI and the dashboard call, by name: the method, the path under /api/v1,
 * and the schemas ($id, schemas/api) of the request body and of the 200 answer. Types come from the
 * schemas, so a renamed field fails the type check of every caller; test/openapi.test.ts checks each
 * entry against the OpenAPI document the controllers produce, so the table cannot name a route or a
 * schema the server does not have.
 */
export const OPERATIONS = {
  /** Who the calling key is (the dashboard's sign-in; the CLI's --team by name). */
  whoAmI: { method: 'GET', path: '/api-key', response: 'ApiKeyInfo' },
  createRun: { method: 'POST', path: '/agent/runs', body: 'RunCreateRequest', response: 'RunCreateResponse' },
  listRuns: { method: 'GET', path: '/agent/runs', query: 'RunListQuery', response: 'RunListResponse' },
  getRun: { method: 'GET', path: '/agent/runs/{runId}', response: 'RunItem' },
  followupRun: {
    method: 'POST',
    path: '/agent/runs/{runId}/followups',
    body: 'RunFollowupRequest',
    response: 'RunFollowupResponse',
  },
  getRunConversation: {
    method: 'GET',
    path: '/agent/runs/{runId}/conversation',
    response: 'RunConversationResponse',
  },
  getRunHarnessUsage: {
    method: 'GET',
    path: '/agent/runs/{runId}/harness-usage',
    response: 'RunHarnessUsageResponse',
  },
  /** Answers the run id as a JSON string (as the Oz clients expect). */
  cancelRun: { method: 'POST', path: '/agent/runs/{runId}/cancel', response: 'string' },
  getArtifact: { method: 'GET', path: '/agent/artifacts/{artifactUid}', response: 'ArtifactItem' },
  createWebhook: {
    method: 'POST',
    path: '/factory/{uid}/webhooks',
    body: 'WebhookCreateRequest',
    response: 'WebhookWithSecret',
  },
  getWebhook: { method: 'GET', path: '/webhooks/{uid}', response: 'WebhookItem' },
  updateWebhook: {
    method: 'PATCH',
    path: '/webhooks/{uid}',
    body: 'WebhookUpdateRequest',
    response: 'WebhookItem',
  },
  enableWebhook: { method: 'POST', path: '/webhooks/{uid}/enable', response: 'WebhookItem' },
  disableWebhook: { method: 'POST', path: '/webhooks/{uid}/disable', response: 'WebhookItem' },
  rotateWebhook: { method: 'POST', path: '/webhooks/{uid}/rotate', response: 'WebhookWithSecret' },
  setWebhookSecret: {
    method: 'POST',
    path: '/webhooks/{uid}/secret',
    body: 'WebhookSecretRequest',
    response: 'WebhookWithSecret',
  },
  testWebhookFilter: {
    method: 'POST',
    path: '/webhooks/{uid}/test-filter',
    body: 'WebhookTestFilterRequest',
    response: 'WebhookTestFilterResponse',
  },
  listDeliveries: { method: 'GET', path: '/webhooks/{uid}/deliveries', response: 'DeliveryListResponse' },
  getDelivery: { method: 'GET', path: '/webhooks/{uid}/deliveries/{id}', response: 'DeliveryDetail' },
  replayDelivery: {
    method: 'POST',
    path: '/webhooks/{uid}/deliveries/{id}/replay',
    response: 'DeliveryDetail',
  },
  skillUsage: { method: 'GET', path: '/skills/usage', response: 'SkillUsageResponse' },
  connectedWorkers: {
    method: 'GET',
    path: '/agent/connected-self-hosted-workers',
    response: 'ConnectedWorkersResponse',
  },
  listFactories: { method: 'GET', path: '/factory', response: 'FactoryListResponse' },
  getFactory: { method: 'GET', path: '/factory/{uid}', response: 'FactoryItem' },
  listFactoryApplies: { method: 'GET', path: '/factory/{uid}/applies', response: 'FactoryApplyListResponse' },
  getFactoryDefinition: {
    method: 'GET',
    path: '/factory/{uid}/definition',
    response: 'FactoryDefinitionResponse',
  },
  planFactory: { method: 'GET', path: '/factory/{uid}/plan', response: 'FactoryPlanResponse' },
  listFactoryWebhooks: { method: 'GET', path: '/factory/{uid}/webhooks', response: 'WebhookListResponse' },
  listNotificationEndpoints: {
    method: 'GET',
    path: '/notifications/endpoints',
    response: 'NotificationEndpointListResponse',
  },
  createNotificationEndpoint: {
    method: 'POST',
    path: '/notifications/endpoints',
    body: 'NotificationEndpointCreateRequest',
    response: 'NotificationEndpointWithSecret',
  },
  listNotificationAttempts: {
    method: 'GET',
    path: '/notifications/endpoints/{id}/attempts',
    response: 'NotificationAttemptListResponse',
  },
  resendNotification: {
    method: 'POST',
    path: '/notifications/endpoints/{id}/messages/{messageId}/resend',
    response: 'NotificationMessage',
  },
} as const satisfies Record<string, Operation>;

interface Operation {
  method: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE';
  /** Under /api/v1; `{name}` is a path parameter. */
  path: string;
  body?: ApiSchemaName;
  /** The schema whose properties are the query parameters (a call may name no other). */
  query?: ApiSchemaName;
  /** The 200 answer's schema; `string` for a bare JSON string. */
  response?: ApiSchemaName | 'string';
}

type OperationName = keyof typeof OPERATIONS;

/** `/webhooks/{uid}/x/{id}` → `{ uid: string; id: string }`. */
type PathParams<P extends string> = P extends `${string}{${infer N}}${infer Rest}`
  ? { [K in N]: string } & PathParams<Rest>
  : unknown;

/** A query value as it goes on the URL: a list repeats the parameter; undefined or '' leaves it out. */
type QueryValue = string | number | boolean | readonly (string | number)[] | undefined;

/** `metadata[key]=value`: a map parameter, one key a parameter. */
type MapParams = { [key: `${string}[${string}]`]: QueryValue };

/** The parameters a query schema names (and map parameters), else any. */
type QueryOf<O> = O extends { query: infer Q extends ApiSchemaName }
  ? { [K in keyof ApiSchemas[Q]]?: QueryValue } & MapParams
  : Record<string, QueryValue>;

type BodyOf<O> = O extends { body: infer B extends ApiSchemaName }
  ? { body: ApiSchemas[B] }
  : { body?: never };

/** What a call takes: its path parameters, its body when it has one, and any query parameters. */
type ArgsOf<K extends OperationName> = PathParams<(typeof OPERATIONS)[K]['path']> &
  BodyOf<(typeof OPERATIONS)[K]> & { query?: QueryOf<(typeof OPERATIONS)[K]> };

/** What a call answers. */
type ResultOf<K extends OperationName> = (typeof OPERATIONS)[K] extends {
  response: infer R;
}
  ? R extends ApiSchemaName
    ? ApiSchemas[R]
    : R extends 'string'
      ? string
      : never
  : void;

/** How a caller sends a request (its own auth, headers and errors): the path is under /api/v1. */
type Send = (method: string, path: string, body?: unknown) => Promise<unknown>;

/** The typed client: `api.call('getRun', { runId })` answers a RunItem. */
export class ApiOperations {
  constructor(private readonly send: Send) {}

  call<K extends OperationName>(
    name: K,
    ...[args]: Partial<ArgsOf<K>> extends ArgsOf<K> ? [ArgsOf<K>?] : [ArgsOf<K>]
  ): Promise<ResultOf<K>> {
    const op: Operation = OPERATIONS[name];
    const given = (args ?? {}) as Record<string, unknown> & {
      query?: Record<string, QueryValue>;
      body?: unknown;
    };
    const path = op.path.replace(/\{(\w+)\}/g, (_, p: string) => encodeURIComponent(String(given[p])));
    return this.send(op.method, `${path}${queryString(given.query ?? {})}`, given.body) as Promise<
      ResultOf<K>
    >;
  }
}

/** `?a=1&b=x&b=y` from the set values (a list repeats its key); '' when none is set. */
export function queryString(params: Record<string, QueryValue>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    for (const one of [v ?? []].flat()) if (one !== '') q.append(k, String(one));
  }
  const s = q.toString();
  return s ? `?${s}` : '';
}
