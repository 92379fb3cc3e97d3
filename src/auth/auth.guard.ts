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
import { ApiExtension, ApiHeader } from '@nestjs/swagger';
import type { FastifyRequest } from 'fastify';
import { routeConfig } from '../common/route-config.js';
import type { Scope } from './api-key.js';
import type { AuthContext } from './auth-context.js';

const SCOPE_KEY = 'factoryd:scope';
const PUBLIC_KEY = 'factoryd:public';

/** Where the OpenAPI document finds a route's scope (buildOpenApi turns it into the route's `security`). */
export const SCOPE_EXTENSION = 'x-required-scope';
/** Marks a @Public() route for the OpenAPI document (buildOpenApi gives it `security: []`). */
export const PUBLIC_EXTENSION = 'x-public';

/** The headers that pick a multi-team key's team (teamHeader), read by every route that states a scope. */
const TEAM_HEADERS = [
  ApiHeader({
    name: 'X-Team-Uid',
    required: false,
    description:
      'The team to act for when the key belongs to several (`factoryd teams list` shows uids); 403 if the key is not a member',
  }),
  ApiHeader({
    name: 'X-Warp-Team-Uid',
    required: false,
    description:
      'The same, under the name the Oz clients send their `team_uid` in; X-Team-Uid is read first when both are sent',
  }),
];

/** The team headers, on a public route that also takes a key (and so its team) when one is sent. */
export const TeamHeaders = () => applyDecorators(...TEAM_HEADERS);

/**
 * The scope a route needs. Every route states one, or is marked @Public(): the guard denies by
 * default. The scope also goes into the route's Fastify config, where ApiEdge checks the key before
 * the body is read, and into the OpenAPI document.
 */
export const RequireScope = (scope: Scope) =>
  applyDecorators(
    SetMetadata(SCOPE_KEY, scope),
    routeConfig({ scope }),
    ApiExtension(SCOPE_EXTENSION, scope),
    ...TEAM_HEADERS,
  );
/** No API key needed (health, schemas, webhook ingress, which authenticates its own way). */
export const Public = () =>
  applyDecorators(SetMetadata(PUBLIC_KEY, true), ApiExtension(PUBLIC_EXTENSION, true));

/**
 * A route that checks the key itself, because it must not select a team (it answers for all of the
 * key's teams): the guard lets it through, and the OpenAPI document names `scope`, which the
 * handler enforces (AuthService.keyOf, then the scope).
 */
export const ChecksOwnKey = (scope: Scope) =>
  applyDecorators(SetMetadata(PUBLIC_KEY, true), ApiExtension(SCOPE_EXTENSION, scope));

type AuthedRequest = FastifyRequest & { auth?: AuthContext };

/** The caller resolved by ApiEdge. */
export const Auth = createParamDecorator((_: unknown, ctx: ExecutionContext): AuthContext => {
  const auth = ctx.switchToHttp().getRequest<AuthedRequest>().auth;
  if (!auth) throw new Error('@Auth() on a route without @RequireScope');
  return auth;
});

/**
 * Denies by default: a route states a scope (whose key ApiEdge has already authenticated and
 * authorized, before the body was read) or is @Public().
 */
@Injectable()
export class ApiKeyGuard implements CanActivate {
  constructor(@Inject(Reflector) private readonly reflector: Reflector) {}

  canActivate(ctx: ExecutionContext): boolean {
    const targets = [ctx.getHandler(), ctx.getClass()];
    if (this.reflector.getAllAndOverride<boolean>(PUBLIC_KEY, targets)) return true;
    const route = `${ctx.getClass().name}.${ctx.getHandler().name}`;
    if (!this.reflector.getAllAndOverride<Scope | undefined>(SCOPE_KEY, targets))
      throw new Error(`route ${route} declares no scope`);
    if (!ctx.switchToHttp().getRequest<AuthedRequest>().auth)
      throw new Error(`route ${route} was not authenticated by ApiEdge (is @RequireScope on its method?)`);
    return true;
  }
}
