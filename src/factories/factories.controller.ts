import { SchemaBody } from '../common/schema-body.js';
import { Controller, Get, HttpCode, Inject, Param, Post, Req } from '@nestjs/common';
import { ApiOperation, ApiQuery, ApiResponse } from '@nestjs/swagger';
import type { FastifyRequest } from 'fastify';
import type { AuthContext } from '../auth/auth-context.js';
import { Auth, Public, RequireScope } from '../auth/auth.guard.js';
import { publicBaseUrl, webhookBaseUrl } from '../common/base-url.js';
import { ApiJsonOk, ApiProblem, ApiProblems } from '../common/openapi-decorators.js';
import { parsePageRequest } from '../common/pagination.js';
import { NotFound } from '../common/problem.js';
import { QueryParams } from '../common/query-params.js';
import { BodyLimit, PROMPT_BODY_LIMIT } from '../common/route-config.js';
import { RequestValidator } from '../common/request-validation.js';
import { SchemaRegistry } from '../common/schema-validator.js';
import { CONFIG, type Config } from '../config/config.js';
import { bundleSchema, DEFINITION_SCHEMAS, schemaDocuments, schemaVersion } from './definition-schemas.js';
import { presentApply, presentDefinition, presentFactory, presentWebhook } from './factory.presenter.js';
import { runPageUrl } from '../runs/run.presenter.js';
import {
  APPLIES_SCOPE,
  FACTORIES_SCOPE,
  FactoriesService,
  type FactoryRunRequest,
} from './factories.service.js';

/** An object with these properties, all required (strings unless the property says otherwise). */
const object = (properties: Record<string, object>) => ({
  type: 'object',
  required: Object.keys(properties),
  properties: Object.fromEntries(
    Object.entries(properties).map(([k, v]) => [k, Object.keys(v).length ? v : { type: 'string' }]),
  ),
});

const SCHEMAS_PATH = '/api/v1/factory-files/schemas';

/** A dispatched run (the clients' `factories.runs.create` response). */
const DISPATCHED = (() => {
  const o = object({
    factory_uid: {},
    foreman_agent: {},
    run_id: {},
    state: { const: 'QUEUED' },
    ticket_ref: { type: 'string', description: 'The caller’s ticket_ref, else the minted `adhoc:<id>`' },
    run_url: { type: 'string', format: 'uri', description: 'The run’s page in the dashboard' },
  });
  return { ...o, properties: { ...o.properties, ticket_url: { type: 'string', format: 'uri' } } };
})();

@Controller('api/v1')
export class FactoriesController {
  constructor(
    @Inject(FactoriesService) private readonly factories: FactoriesService,
    @Inject(RequestValidator) private readonly validate: RequestValidator,
    @Inject(SchemaRegistry) private readonly schemas: SchemaRegistry,
    @Inject(CONFIG) private readonly config: Config,
  ) {}

  @Get('factory')
  @RequireScope('runs:read')
  @ApiOperation({ summary: 'List the factories of the caller’s team' })
  @ApiQuery({ name: 'search', required: false, schema: { type: 'string' } })
  @ApiQuery({
    name: 'filter_team_uid',
    required: false,
    schema: { type: 'string' },
    description:
      'The owning team (the Python client sends `team_uid`): the selected team’s factories when it names that team, none otherwise',
  })
  @ApiJsonOk('FactoryListResponse')
  @ApiProblems(403)
  async list(@Auth() auth: AuthContext, @Req() req: FastifyRequest) {
    const query = QueryParams.of(req);
    // The clients' team filter: a key lists one team's factories (X-Team-Uid picks it), so naming
    // another team matches none.
    const owner = query.one('filter_team_uid') ?? query.one('team_uid');
    if (owner !== undefined && owner !== auth.team.uid)
      return { factories: [], page_info: { has_next_page: false } };
    const { factories, pageInfo } = await this.factories.list(auth, {
      ...parsePageRequest(query, FACTORIES_SCOPE, { fallback: 50, max: 100 }),
      search: query.one('search') || undefined,
    });
    return { factories: factories.map(presentFactory), page_info: pageInfo };
  }

  @Get('factory/:uid')
  @RequireScope('runs:read')
  @ApiOperation({ summary: 'One factory' })
  @ApiJsonOk('FactoryItem', 'The factory: its repository, status and applied definition')
  @ApiProblems(403, 404)
  async get(@Auth() auth: AuthContext, @Param('uid') uid: string) {
    return presentFactory(await this.factories.get(auth, uid));
  }

  @Get('factory/:uid/applies')
  @RequireScope('runs:read')
  @ApiOperation({ summary: 'The apply history of a factory' })
  @ApiJsonOk('FactoryApplyListResponse')
  @ApiProblems(403, 404)
  async applies(@Auth() auth: AuthContext, @Param('uid') uid: string, @Req() req: FastifyRequest) {
    const page = parsePageRequest(QueryParams.of(req), APPLIES_SCOPE, { fallback: 20, max: 100 });
    const { applies, pageInfo } = await this.factories.applies(auth, uid, page);
    return { applies: applies.map(presentApply), page_info: pageInfo };
  }

  @Get('factory/:uid/definition')
  @RequireScope('runs:read')
  @ApiOperation({
    summary: 'The applied agents, automations and skills of a factory',
    description:
      'A webhook trigger lists its webhooks by UID and name (`name` null for a UID the factory never had).',
  })
  @ApiJsonOk('FactoryDefinitionResponse')
  @ApiProblems(403, 404)
  async definition(@Auth() auth: AuthContext, @Param('uid') uid: string) {
    return presentDefinition(await this.factories.definition(auth, uid));
  }

  @Get('factory/:uid/plan')
  @RequireScope('runs:read')
  @ApiOperation({
    summary: 'What the next reconcile would change',
    description:
      'Fetches the production branch and plans its head against the applied state, as `factoryd plan` does; nothing is applied or recorded.',
  })
  @ApiJsonOk('FactoryPlanResponse')
  @ApiProblems(403, 404)
  async plan(@Auth() auth: AuthContext, @Param('uid') uid: string) {
    const o = await this.factories.plan(auth, uid);
    return { result: o.result, revision: o.revision, errors: o.errors, ...(o.plan ? { plan: o.plan } : {}) };
  }

  @Get('factory/:uid/webhooks')
  @RequireScope('runs:read')
  @ApiOperation({ summary: 'The webhooks of a factory, with their ingress URLs' })
  @ApiJsonOk('WebhookListResponse')
  @ApiProblems(403, 404)
  async webhooks(@Auth() auth: AuthContext, @Param('uid') uid: string, @Req() req: FastifyRequest) {
    const all = QueryParams.of(req).one('include_deleted') === 'true';
    const base = webhookBaseUrl(req, this.config);
    const rows = await this.factories.webhooks(auth, uid, all);
    return { webhooks: rows.map((w) => presentWebhook(w, base)) };
  }

  @Post('factory/:uid/runs')
  @HttpCode(200)
  @RequireScope('runs:write')
  @BodyLimit(PROMPT_BODY_LIMIT)
  @ApiOperation({ summary: 'Start a run of the factory’s foreman, linked to the ticket it works on' })
  @ApiJsonOk(DISPATCHED, 'The run, queued')
  @ApiProblems(403, 404, 409, 429)
  async dispatch(
    @Auth() auth: AuthContext,
    @Param('uid') uid: string,
    @SchemaBody('FactoryRunRequest') body: FactoryRunRequest,
    @Req() req: FastifyRequest,
  ) {
    const run = await this.factories.dispatch(auth, uid, body);
    return { ...run, run_url: runPageUrl(publicBaseUrl(req, this.config.publicBaseUrl), run.run_id) };
  }

  @Post('factory/:uid/refresh')
  @HttpCode(202)
  @RequireScope('factory:manage')
  @ApiOperation({ summary: 'Fetch and apply the factory’s repository now' })
  @ApiResponse({
    status: 202,
    description: 'Reconciling; the outcome appears in the factory’s status and applies',
    content: {
      'application/json': { schema: object({ factory_uid: {}, status: { const: 'reconciling' } }) },
    },
  })
  @ApiProblems(403, 404)
  refresh(@Auth() auth: AuthContext, @Param('uid') uid: string) {
    return this.factories.refresh(auth, uid);
  }

  @Get('factory-files/schemas')
  @Public()
  @ApiOperation({
    summary:
      'The JSON Schemas of the definition files (for editors and CI), and their version as the Oz clients list it',
  })
  @ApiJsonOk({
    type: 'object',
    required: ['schemas', 'current_version', 'versions'],
    properties: {
      schemas: { type: 'array', items: object({ file: {}, id: {}, url: {}, schema: { type: 'object' } }) },
      current_version: { type: 'string', description: 'factory.yaml’s schemaVersion' },
      versions: { type: 'array', items: object({ schema_version: {}, schema_url: {} }) },
    },
  })
  listSchemas(@Req() req: FastifyRequest) {
    const base = `${publicBaseUrl(req, this.config.publicBaseUrl)}${SCHEMAS_PATH}`;
    const version = schemaVersion(this.schemas);
    return {
      schemas: DEFINITION_SCHEMAS.map((s) => ({
        file: s.file,
        id: s.id,
        url: `${base}/${s.name}.schema.json`,
        schema: bundleSchema(this.schemas, s.id),
      })),
      current_version: version,
      versions: [{ schema_version: version, schema_url: `${SCHEMAS_PATH}/${version}` }],
    };
  }

  @Get('factory-files/schemas/:name')
  @Public()
  @ApiOperation({
    summary:
      'One definition file’s JSON Schema (`webhook.schema.json`), or a version’s bundle of them all (`v1alpha1`)',
  })
  @ApiJsonOk(
    { type: 'object' },
    'The JSON Schema, with every schema it references under `$defs`; for a version, `{schema_version, documents}` by file name',
  )
  @ApiProblem(404, 'No such schema or version; the detail lists those there are')
  schema(@Param('name') name: string) {
    if (name === schemaVersion(this.schemas))
      return { schema_version: name, documents: schemaDocuments(this.schemas) };
    return this.document(name);
  }

  @Get('factory-files/schemas/:version/:document')
  @Public()
  @ApiOperation({
    summary: 'One definition file’s JSON Schema in a version, e.g. `v1alpha1/factory.schema.json`',
  })
  @ApiJsonOk({ type: 'object' }, 'The JSON Schema, with every schema it references under `$defs`')
  @ApiProblem(404, 'No such schema or version; the detail lists those there are')
  versionedSchema(@Param('version') version: string, @Param('document') document: string) {
    if (version !== schemaVersion(this.schemas))
      throw new NotFound(`no schema version ${version}; there is ${schemaVersion(this.schemas)}`);
    return this.document(document);
  }

  private document(file: string) {
    const s = DEFINITION_SCHEMAS.find((d) => `${d.name}.schema.json` === file);
    if (!s)
      throw new NotFound(
        `no schema ${file}; there are ${DEFINITION_SCHEMAS.map((d) => `${d.name}.schema.json`).join(', ')} and the version ${schemaVersion(this.schemas)}`,
      );
    return bundleSchema(this.schemas, s.id);
  }
}
