import { FASTIFY_ROUTE_CONFIG_METADATA } from '@nestjs/platform-fastify/constants.js';
import type { RouteOptions } from 'fastify';

/**
 * What a route tells Fastify about itself before any of its body is read (Fastify's route `config`,
 * which Nest fills from the handler's metadata): the scope its API key needs, checked in an
 * onRequest hook, and its body limit, when it is not DEFAULT_BODY_LIMIT.
 */
export interface EdgeRouteConfig {
  scope?: string;
  bodyLimit?: number;
}

/** Every route's body limit unless it declares its own: management and control bodies are small. */
export const DEFAULT_BODY_LIMIT = 64 * 1024;

/** A body carrying a prompt or a message (at most 200,000 characters) in UTF-8, with room for JSON escapes. */
export const PROMPT_BODY_LIMIT = 1024 * 1024;

/** Adds to a handler's Fastify route config (Nest's own RouteConfig replaces it: two of ours must add up). */
export function routeConfig(patch: EdgeRouteConfig): MethodDecorator {
  return (_target, _key, descriptor) => {
    const handler = descriptor.value as object;
    const current = (Reflect.getMetadata(FASTIFY_ROUTE_CONFIG_METADATA, handler) ?? {}) as EdgeRouteConfig;
    Reflect.defineMetadata(FASTIFY_ROUTE_CONFIG_METADATA, { ...current, ...patch }, handler);
    return descriptor;
  };
}

/** The largest body (bytes) this route reads; past it, a 413 naming the limit, and nothing more is buffered. */
export const BodyLimit = (bytes: number) => routeConfig({ bodyLimit: bytes });

/** For an onRoute hook: a route that declared its own body limit gets it from Fastify. */
export function applyBodyLimit(route: RouteOptions): void {
  const limit = (route.config as EdgeRouteConfig | undefined)?.bodyLimit;
  if (limit) route.bodyLimit = limit;
}
