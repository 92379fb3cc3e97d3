import type { IncomingMessage } from 'node:http';
import { RequestMethod } from '@nestjs/common';
import type { Params } from 'nestjs-pino';
import type { Config } from './config/config.js';

/** `/webhooks/w/<uid>/<token>`: the URL itself is a credential and never reaches a log. */
export function redactUrl(url: string): string {
  return url.replace(/^(\/webhooks\/w\/[^/?#]+\/)[^/?#]+/, '$1[REDACTED]');
}

const LOGGED_HEADERS = ['user-agent', 'content-type', 'content-length', 'x-team-uid'];

/**
 * JSON logs with request ids. Requests are logged through an allowlist: no Authorization, cookies,
 * signature headers or URL tokens ever reach the log.
 */
export function loggerOptions(config: Config): Params {
  return {
    // Every route, explicitly: with NestJS 12 on Fastify the default `{/*splat}` matched no request.
    // At `silent` no route: the request logger would log nothing, yet cost every request its
    // middleware (about a tenth of the ingress's time in Node).
    forRoutes: config.logLevel === 'silent' ? [] : [{ path: '*splat', method: RequestMethod.ALL }],
    pinoHttp: {
      level: config.logLevel,
      genReqId: (req: IncomingMessage) => (req as IncomingMessage & { id: string }).id,
      customLogLevel: (_req, res, err) =>
        err || res.statusCode >= 500 ? 'error' : res.statusCode >= 400 ? 'warn' : 'info',
      serializers: {
        req: (req: {
          id: string;
          method: string;
          url: string;
          headers: Record<string, string>;
          remoteAddress: string;
        }) => ({
          id: req.id,
          method: req.method,
          url: redactUrl(req.url),
          remoteAddress: req.remoteAddress,
          headers: Object.fromEntries(
            LOGGED_HEADERS.filter((h) => req.headers?.[h]).map((h) => [h, req.headers[h]]),
          ),
        }),
        res: (res: { statusCode: number }) => ({ statusCode: res.statusCode }),
      },
      redact: { paths: ['req.headers.authorization', 'req.headers.cookie'], censor: '[REDACTED]' },
    },
  };
}
