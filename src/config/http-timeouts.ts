import type { FastifyServerOptions } from 'fastify';
import type { Config } from './config.js';

/** How often Node looks for requests past their timeouts (its default, 30 s, would let them run late). */
const CHECK_EVERY_MS = 1000;

/**
 * Node's HTTP server timeouts, on every route: the headers must arrive within
 * HTTP_HEADERS_TIMEOUT_MS and the whole request (headers and body) within HTTP_REQUEST_TIMEOUT_MS,
 * else Node answers 408 and closes the connection, so a trickling client holds no slot; an idle
 * keep-alive connection closes after HTTP_KEEP_ALIVE_TIMEOUT_MS. A handler's own work (a claim's
 * long poll) is not limited here: the request is complete by then.
 */
export function httpTimeouts(config: Config): Partial<FastifyServerOptions> {
  return {
    requestTimeout: config.httpRequestTimeoutMs,
    keepAliveTimeout: config.httpKeepAliveTimeoutMs,
    http: {
      headersTimeout: config.httpHeadersTimeoutMs,
      requestTimeout: config.httpRequestTimeoutMs,
      connectionsCheckingInterval: Math.min(CHECK_EVERY_MS, config.httpHeadersTimeoutMs),
    },
  } as Partial<FastifyServerOptions>;
}
