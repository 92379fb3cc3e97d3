import { Inject, Injectable, type OnModuleInit } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { mustCloseAfterRefusal } from '../common/drain.js';
import { NotAuthorized, RequestInvalid } from '../common/problem.js';
import { QueryParams } from '../common/query-params.js';
import type { EdgeRouteConfig } from '../common/route-config.js';
import { findInputProblem, unstorableText, type InputProblem } from '../common/storable.js';
import { WORKER_SCOPE, workerKeyCommand, type Scope } from './api-key.js';
import type { AuthContext } from './auth-context.js';
import { AuthService, teamHeader } from './auth.service.js';
import { cliCommand } from '../common/cli-command.js';

type AuthedRequest = FastifyRequest & { auth?: AuthContext };

/**
 * The API's edge, as Fastify hooks on every route that needs an API key (@RequireScope):
 * - onRequest, before any of the body is read: the key is authenticated and its scope checked (Nest
 *   guards run only after the body is parsed). A refusal discards at most a small part of the body,
 *   then answers, closing the connection when more was left.
 * - preValidation, once the body is parsed and before any controller: path parameters, the query
 *   string and the body are checked for what PostgreSQL cannot store (NUL, lone surrogates) and for
 *   nesting past MAX_JSON_DEPTH, each a 400 naming the field.
 */
@Injectable()
export class ApiEdge implements OnModuleInit {
  constructor(
    @Inject(HttpAdapterHost) private readonly host: HttpAdapterHost,
    @Inject(AuthService) private readonly auth: AuthService,
  ) {}

  onModuleInit(): void {
    const fastify = this.host.httpAdapter.getInstance<FastifyInstance>();
    fastify.addHook('onRequest', (req, reply) => this.authenticate(req, reply));
    fastify.addHook('preValidation', async (req) => {
      if (!scopeOf(req)) return;
      const problem = inputProblem(req);
      if (problem) throw new RequestInvalid([problem]);
    });
  }

  private async authenticate(req: AuthedRequest, reply: FastifyReply): Promise<void> {
    const scope = scopeOf(req);
    if (!scope) return;
    try {
      const auth = await this.auth.authenticate(req.headers.authorization, teamHeader(req.headers));
      if (!auth.scopes.has(scope)) throw new NotAuthorized(refusal(scope, auth));
      req.auth = auth;
    } catch (err) {
      if (await mustCloseAfterRefusal(req.raw)) void reply.header('Connection', 'close');
      throw err;
    }
  }
}

/**
 * Why the key may not call this route; a worker with a caller's key is told how to get a worker key
 * (the host is not known yet: the body, which names it, is not read before the key is accepted).
 */
function refusal(scope: Scope, auth: AuthContext): string {
  const lacks = `This API key lacks the scope ${scope} (it has ${[...auth.scopes].join(', ')}).`;
  if (scope !== WORKER_SCOPE) return lacks;
  return (
    `${lacks} The worker API takes only worker keys, each bound to one worker_host (runs:write no longer ` +
    `serves workers). Issue one with \`${workerKeyCommand(auth.team.name, 'ID')}\` and start the worker ` +
    `with it: \`${cliCommand('worker --worker-host ID --api-key <the new key>')}\`.`
  );
}

function scopeOf(req: FastifyRequest): Scope | undefined {
  return (req.routeOptions.config as EdgeRouteConfig | undefined)?.scope as Scope | undefined;
}

function inputProblem(req: FastifyRequest): InputProblem | undefined {
  for (const [name, value] of Object.entries((req.params ?? {}) as Record<string, string>)) {
    const why = unstorableText(value);
    if (why) return { path: name, message: `the path parameter ${name} ${why}` };
  }
  for (const [name, value] of QueryParams.of(req).entries()) {
    const why = unstorableText(name) ?? unstorableText(value);
    if (why) return { path: name, message: `the query parameter ${JSON.stringify(name)} ${why}` };
  }
  return req.body === undefined ? undefined : findInputProblem(req.body);
}
