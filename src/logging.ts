import type { IncomingMessage } from 'node:http';
import type { LoggerService } from '@nestjs/common';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import type { Logger as Pino, Level } from 'pino';
import { pinoHttp, type Options } from 'pino-http';
import type { Config } from './config/config.js';

/** `/webhooks/w/<uid>/<token>`: the URL itself is a credential and never reaches a log. */
export function redactUrl(url: string): string {
  return url.replace(/^(\/webhooks\/w\/[^/?#]+\/)[^/?#]+/, '$1[REDACTED]');
}

const LOGGED_HEADERS = ['user-agent', 'content-type', 'content-length', 'x-team-uid'];

/**
 * JSON logs (pino) for the application's own lines and one line per request. Requests are logged
 * through an allowlist: no Authorization, cookies, signature headers or URL tokens ever reach the log.
 */
export function installLogging(app: NestFastifyApplication, config: Config): void {
  const requests = pinoHttp(requestLogOptions(config));
  app.useLogger(new NestPinoLogger(requests.logger));
  // At `silent` no hook: it would log nothing, yet cost every request its work (about a tenth of
  // the ingress's time in Node).
  if (config.logLevel === 'silent') return;
  app
    .getHttpAdapter()
    .getInstance()
    .addHook('onRequest', (req, reply, done) => {
      requests(req.raw, reply.raw);
      done();
    });
}

function requestLogOptions(config: Config): Options {
  return {
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
  };
}

/**
 * NestJS's Logger (`new Logger('Reconciler').warn(…)`) written through pino: Nest passes the
 * logger's name last, which becomes `context`; an object first argument is merged into the line.
 */
class NestPinoLogger implements LoggerService {
  constructor(private readonly pino: Pino) {}

  log(message: unknown, ...rest: unknown[]) {
    this.write('info', message, rest);
  }
  error(message: unknown, ...rest: unknown[]) {
    this.write('error', message, rest);
  }
  warn(message: unknown, ...rest: unknown[]) {
    this.write('warn', message, rest);
  }
  debug(message: unknown, ...rest: unknown[]) {
    this.write('debug', message, rest);
  }
  verbose(message: unknown, ...rest: unknown[]) {
    this.write('trace', message, rest);
  }
  fatal(message: unknown, ...rest: unknown[]) {
    this.write('fatal', message, rest);
  }

  private write(level: Level, message: unknown, rest: unknown[]): void {
    const context = rest.length ? rest[rest.length - 1] : undefined;
    // Nest's own exception handlers call error(message, stack, context); `undefined` fills the gaps.
    const params = rest.slice(0, -1).filter((p) => p !== undefined);
    const fields: Record<string, unknown> = context === undefined ? {} : { context };
    if (message instanceof Error) {
      this.pino[level]({ ...fields, err: message }, ...(params as []));
    } else if (typeof message === 'object' && message !== null) {
      this.pino[level]({ ...fields, ...message }, ...(params as []));
    } else if (level === 'error' && typeof params[0] === 'string' && /\n\s*at /.test(params[0])) {
      this.pino[level]({ ...fields, err: { message: String(message), stack: params[0] } });
    } else {
      this.pino[level](fields, String(message), ...(params as []));
    }
  }
}
