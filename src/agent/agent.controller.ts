import { Controller, Get, Inject, Param, Req, Res } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiParam, ApiQuery, ApiResponse, ApiTags } from '@nestjs/swagger';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AuthContext } from '../auth/auth-context.js';
import { Auth, Public, RequireScope, TeamHeaders } from '../auth/auth.guard.js';
import { AuthService, teamHeader } from '../auth/auth.service.js';
import { invalidParam } from '../common/problem.js';
import { publicBaseUrl } from '../common/base-url.js';
import { QueryParams } from '../common/query-params.js';
import { ApiJsonOk, ApiProblem, ApiProblems } from '../common/openapi-decorators.js';
import { NotAuthorized } from '../common/problem.js';
import { CONFIG, type Config } from '../config/config.js';
import { AgentCatalogService } from './agent-catalog.service.js';
import { ArtifactsService } from './artifacts.service.js';
import { RedirectsService } from './redirects.service.js';

const object = (properties: Record<string, unknown>, required = Object.keys(properties)) => ({
  type: 'object',
  required,
  properties,
});
const WITH_KEY =
  'With an API key: JSON within the key’s team, or 302 to the dashboard’s run page (`/ui/runs/<id>`) when the caller asks for HTML.';
const REDIRECT = {
  session: `${WITH_KEY} Without one (as the clients send it): the session id is the credential, and an ended run’s session names its conversation; a live or unknown one is \`{}\`.`,
  conversation: `${WITH_KEY} Without one: \`{}\`.`,
};

/** The rest of the clients' `client.agent.*`: skills, environments, artifacts, handoff files, redirects. */
@ApiTags('Agents')
@ApiBearerAuth()
@Controller('api/v1/agent')
export class AgentController {
  constructor(
    @Inject(AgentCatalogService) private readonly catalog: AgentCatalogService,
    @Inject(ArtifactsService) private readonly artifacts: ArtifactsService,
    @Inject(RedirectsService) private readonly redirects: RedirectsService,
    @Inject(AuthService) private readonly auth: AuthService,
    @Inject(CONFIG) private readonly config: Config,
  ) {}

  @Get()
  @ApiOperation({ summary: 'The skills the team’s factories manage, one agent per skill name' })
  @ApiQuery({ name: 'repo', required: false, schema: { type: 'string' }, description: '`owner/repo`' })
  @ApiQuery({ name: 'sort_by', required: false, schema: { enum: ['name', 'last_run'] } })
  @ApiQuery({
    name: 'refresh',
    required: false,
    schema: { type: 'boolean' },
    description: 'Accepted; nothing is cached',
  })
  @ApiQuery({
    name: 'include_malformed_skills',
    required: false,
    schema: { type: 'boolean' },
    description: 'Accepted; a malformed SKILL.md never applies',
  })
  @ApiJsonOk(object({ agents: { type: 'array', items: { type: 'object' } } }))
  @ApiProblems(403)
  @RequireScope('runs:read')
  skills(@Auth() auth: AuthContext, @Req() req: FastifyRequest) {
    const q = QueryParams.of(req);
    return this.catalog.skills(auth, {
      sortBy: oneOf(q, 'sort_by', ['name', 'last_run'] as const, 'name'),
      repo: q.one('repo'),
    });
  }

  @Get('environments')
  @ApiOperation({ summary: 'The environments the team’s runs, factories and named agents name' })
  @ApiQuery({ name: 'sort_by', required: false, schema: { enum: ['name', 'last_updated'] } })
  @ApiJsonOk(object({ environments: { type: 'array', items: { type: 'object' } } }))
  @ApiProblems(403)
  @RequireScope('runs:read')
  environments(@Auth() auth: AuthContext, @Req() req: FastifyRequest) {
    return this.catalog.environments(auth, {
      sortBy: oneOf(QueryParams.of(req), 'sort_by', ['name', 'last_updated'] as const, 'last_updated'),
    });
  }

  @Get('environments/:uid')
  @ApiOperation({ summary: 'One environment the team’s factories define (by uid or name)' })
  @ApiParam({ name: 'uid', schema: { type: 'string' } })
  @ApiJsonOk(
    object({ uid: { type: 'string' }, config: { type: 'object' }, last_updated: { type: 'string' } }),
  )
  @ApiProblems(403, 404)
  @RequireScope('runs:read')
  environment(@Auth() auth: AuthContext, @Param('uid') uid: string) {
    return this.catalog.environment(auth, uid);
  }

  @Get('artifacts/:artifactUid')
  @ApiOperation({ summary: 'One artifact: a plan with its text, a file or screenshot with a download link' })
  @ApiParam({ name: 'artifactUid', schema: { type: 'string' } })
  @ApiJsonOk('ArtifactItem')
  @ApiProblems(403, 404)
  @RequireScope('runs:read')
  artifact(@Auth() auth: AuthContext, @Param('artifactUid') uid: string, @Req() req: FastifyRequest) {
    return this.artifacts.get(auth, uid, publicBaseUrl(req, this.config.publicBaseUrl));
  }

  @Get('run-by-external-reference')
  @ApiOperation({ summary: 'The run that reported an external reference artifact with this URL' })
  @ApiQuery({ name: 'url', required: true, schema: { type: 'string' }, description: 'Matched exactly' })
  @ApiJsonOk(object({ run_id: { type: 'string', format: 'uuid' } }))
  @ApiProblems(403, 404)
  @RequireScope('runs:read')
  runByExternalReference(@Auth() auth: AuthContext, @Req() req: FastifyRequest) {
    return this.artifacts.runOfExternalReference(auth, QueryParams.of(req).one('url'));
  }

  @Get('artifacts/:artifactUid/download')
  @Public()
  @TeamHeaders()
  @ApiOperation({
    summary:
      'An artifact’s content: with an API key of its team, or through the signed link `download_url` gives',
  })
  @ApiParam({ name: 'artifactUid', schema: { type: 'string' } })
  @ApiQuery({ name: 'expires', required: false, schema: { type: 'string' }, description: 'Of a signed link' })
  @ApiQuery({
    name: 'signature',
    required: false,
    schema: { type: 'string' },
    description: 'Of a signed link',
  })
  @ApiResponse({ status: 200, description: 'The content', content: { 'application/octet-stream': {} } })
  @ApiProblem(
    403,
    'Neither an API key nor a signed link; the link is invalid or has expired; the key lacks runs:read',
  )
  @ApiProblem(404)
  @ApiProblem(500)
  async download(
    @Param('artifactUid') uid: string,
    @Req() req: FastifyRequest,
    @Res({ passthrough: true }) reply: FastifyReply,
  ) {
    const q = QueryParams.of(req);
    const [expires, signature] = [q.one('expires'), q.one('signature')];
    const signed = expires !== undefined || signature !== undefined;
    const auth = signed ? undefined : await this.optionalAuth(req);
    // Without either it is a link without its signature: refused like a changed one (the route is
    // public, so it never asks for a key with a 401).
    if (!signed && !auth)
      throw new NotAuthorized(
        'This download needs an API key of the artifact’s team ("Authorization: Bearer <key>") or the signed download_url that GET /api/v1/agent/artifacts/{uid} gives.',
      );
    const file = auth
      ? await this.artifacts.downloadWithKey(auth, uid)
      : await this.artifacts.download(uid, expires, signature);
    void reply
      .header('Content-Type', file.type)
      .header('Content-Disposition', `attachment; filename="${file.name.replace(/[^A-Za-z0-9._-]/g, '_')}"`)
      .header('X-Content-Type-Options', 'nosniff');
    return file.bytes;
  }

  @Get('runs/:runId/handoff/attachments')
  @ApiOperation({ summary: 'The files the run’s latest ended execution left for the next' })
  @ApiParam({ name: 'runId', schema: { type: 'string' } })
  @ApiJsonOk(object({ attachments: { type: 'array', items: { type: 'object' } } }))
  @ApiProblems(403, 404)
  @RequireScope('runs:read')
  handoff(@Auth() auth: AuthContext, @Param('runId') runId: string, @Req() req: FastifyRequest) {
    return this.artifacts.handoff(auth, runId, publicBaseUrl(req, this.config.publicBaseUrl));
  }

  @Get('sessions/:sessionUuid/redirect')
  @Public()
  @TeamHeaders()
  @ApiOperation({ summary: 'Whether a session redirects to its conversation (its run has ended)' })
  @ApiParam({ name: 'sessionUuid', schema: { type: 'string' } })
  @ApiJsonOk(object({ conversation_id: { type: 'string' } }, []), REDIRECT.session)
  @ApiResponse({ status: 302, description: 'To the dashboard’s run page' })
  @ApiProblems(403, 404)
  async sessionRedirect(
    @Param('sessionUuid') id: string,
    @Req() req: FastifyRequest,
    @Res({ passthrough: true }) reply: FastifyReply,
  ) {
    const auth = await this.optionalAuth(req);
    if (!auth) return this.redirects.sessionWithoutKey(id);
    const { runId, body } = await this.redirects.session(auth.team.id, id);
    return this.answer(req, reply, runId, body);
  }

  @Get('conversations/:conversationId/redirect')
  @Public()
  @TeamHeaders()
  @ApiOperation({ summary: 'Whether a conversation redirects to a live session (its newest run is live)' })
  @ApiParam({ name: 'conversationId', schema: { type: 'string' } })
  @ApiJsonOk(object({ session_id: { type: 'string' } }, []), REDIRECT.conversation)
  @ApiResponse({ status: 302, description: 'To the dashboard’s run page' })
  @ApiProblems(403, 404)
  async conversationRedirect(
    @Param('conversationId') id: string,
    @Req() req: FastifyRequest,
    @Res({ passthrough: true }) reply: FastifyReply,
  ) {
    const auth = await this.optionalAuth(req);
    if (!auth) return {};
    const { runId, body } = await this.redirects.conversation(auth.team.id, id);
    return this.answer(req, reply, runId, body);
  }

  /**
   * The key of a route that also answers without one (the redirects, which the newest clients call
   * without a key, and a download through a signed link): when sent, it is checked as on every read
   * (runs:read) and the lookup is its team's.
   */
  private async optionalAuth(req: FastifyRequest): Promise<AuthContext | undefined> {
    if (req.headers.authorization === undefined) return undefined;
    const auth = await this.auth.authenticate(req.headers.authorization, teamHeader(req.headers));
    if (!auth.scopes.has('runs:read'))
      throw new NotAuthorized(
        `This API key lacks the scope runs:read (it has ${[...auth.scopes].join(', ')}).`,
      );
    return auth;
  }

  /** A browser (asking for HTML, not JSON) goes to the dashboard's run page; a client gets JSON. */
  private answer(req: FastifyRequest, reply: FastifyReply, runId: string, body: object) {
    const accept = req.headers.accept ?? '';
    if (accept.includes('text/html') && !accept.includes('application/json')) {
      void reply.code(302).header('Location', `/ui/runs/${runId}`);
      return '';
    }
    return body;
  }
}

/** A parameter with a fixed set of values (400 naming it otherwise). */
function oneOf<T extends string>(q: QueryParams, name: string, allowed: readonly T[], fallback: T): T {
  const v = q.one(name) ?? fallback;
  if (!(allowed as readonly string[]).includes(v))
    throw invalidParam(name, `${name} must be one of ${allowed.join(', ')}, got "${v}"`);
  return v as T;
}
