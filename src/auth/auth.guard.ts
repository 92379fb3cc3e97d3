import {
  applyDecorators,
  type CanActivate,
  createParamDecorator,
  type ExecutionContext,
  Inject,
  Injectable,
  SetMetadata,
} from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { ApiExtension } from '@nestjs/swagger';
import type { FastifyRequest } from 'fastify';
import { NotAuthorized } from '../common/problem.js';
import { selfHostedHostProblem } from '../common/worker-host.js';
import { WORKER_SCOPE, workerKeyCommand, type Scope } from './api-key.js';
import type { AuthContext } from './auth-context.js';
import { AuthService } from './auth.service.js';

const SCOPE_KEY = 'factoryd:scope';
const PUBLIC_KEY = 'factoryd:public';

/** Where the OpenAPI document finds a route's scope (buildOpenApi turns it into the route's `security`). */
export const SCOPE_EXTENSION = 'x-required-scope';

/** The scope a route needs. Every route states one, or is marked @Public(): the guard denies by default. */
export const RequireScope = (scope: Scope) =>
  applyDecorators(SetMetadata(SCOPE_KEY, scope), ApiExtension(SCOPE_EXTENSION, scope));
/** No API key needed (health, schemas, webhook ingress, which authenticates its own way). */
export const Public = () => SetMetadata(PUBLIC_KEY, true);

type AuthedRequest = FastifyRequest & { auth?: AuthContext };

/** The caller resolved by ApiKeyGuard. */
export const Auth = createParamDecorator((_: unknown, ctx: ExecutionContext): AuthContext => {
  const auth = ctx.switchToHttp().getRequest<AuthedRequest>().auth;
  if (!auth) throw new Error('@Auth() on a route without ApiKeyGuard');
  return auth;
});

@Injectable()
export class ApiKeyGuard implements CanActivate {
  constructor(
    @Inject(Reflector) private readonly reflector: Reflector,
    @Inject(AuthService) private readonly auth: AuthService,
  ) {}

  async canActivate(ctx: ExecutionContext): Promise<boolean> {
    const targets = [ctx.getHandler(), ctx.getClass()];
    if (this.reflector.getAllAndOverride<boolean>(PUBLIC_KEY, targets)) return true;
    const scope = this.reflector.getAllAndOverride<Scope | undefined>(SCOPE_KEY, targets);
    if (!scope) throw new Error(`route ${ctx.getClass().name}.${ctx.getHandler().name} declares no scope`);
    const req = ctx.switchToHttp().getRequest<AuthedRequest>();
    const header = req.headers['x-team-uid'];
    const auth = await this.auth.authenticate(
      req.headers.authorization,
      Array.isArray(header) ? header[0] : header,
    );
    if (!auth.scopes.has(scope)) throw new NotAuthorized(refusal(scope, auth, req.body));
    req.auth = auth;
    return true;
  }
}

/** Why the key may not call this route; a worker with a caller's key is told how to get a worker key. */
function refusal(scope: Scope, auth: AuthContext, body: unknown): string {
  const lacks = `This API key lacks the scope ${scope} (it has ${[...auth.scopes].join(', ')}).`;
  if (scope !== WORKER_SCOPE) return lacks;
  const host = (body as { worker_host?: unknown } | undefined)?.worker_host;
  const named = selfHostedHostProblem(host) ? 'ID' : (host as string);
  return (
    `${lacks} The worker API takes only worker keys, each bound to one worker_host (runs:write no longer ` +
    `serves workers). Issue one with \`${workerKeyCommand(auth.team.name, named)}\` and start the worker ` +
    `with it: \`factoryd worker --worker-host ${named} --api-key <the new key>\`.`
  );
}
