import type { LoggerService } from '@nestjs/common';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { pino, type DestinationStream, type Logger as Pino, type Level } from 'pino';
import type { Config } from './config/config.js';

/** `/webhooks/w/<uid>/<token>`: the URL itself is a credential and never reaches a log. */
function redactUrl(url: string): string {
  return url.replace(/^(\/webhooks\/w\/[^/?#]+\/)[^/?#]+/, '$1[REDACTED]');
}

/**
 * A request's URL as logged: its path (a webhook token redacted) and the names of its query
 * parameters, never their values. A caller may put a credential in any of them (`?api_key=…`,
 * `?token=…`); a list of sensitive names would miss the next one.
 */
export function loggedUrl(url: string): { url: string; query?: string[] } {
  const at = url.indexOf('?');
  if (at < 0) return { url: redactUrl(url) };
  const names = [...new Set(new URLSearchParams(url.slice(at + 1)).keys())];
  return { url: redactUrl(url.slice(0, at)), query: names };
}

/**
 * A request's level: a bug (5xx) at error; the caller's mistake (4xx) and a 503 — the database or a
 * backend is away for a while, answered with Retry-After (docs/operations.md) — at warn; an answered
 * request, and a caller gone before its answer, at debug: at info a dashboard's polling alone wrote
 * hundreds of lines an hour (slow requests show in /metrics, docs/operations.md).
 */
export function requestLevel(status: number | undefined): 'debug' | 'warn' | 'error' {
  if (status === undefined || status < 400) return 'debug';
  return status < 500 || status === 503 ? 'warn' : 'error';
}

const LOGGED_HEADERS = ['user-agent', 'content-type', 'content-length', 'x-team-uid', 'x-warp-team-uid'];

/**
 * JSON logs (pino) for the application's own lines and one line per request. Requests are logged
 * through an allowlist: no Authorization, cookies, signature headers or URL tokens ever reach the log.
 */
export function installLogging(
  app: NestFastifyApplication,
  config: Config,
  /** Where the lines go: stdout, or (a test reading what would be logged) a stream of its own. */
  destination?: DestinationStream,
): void {
  const options = {
    level: config.logLevel,
    redact: { paths: ['req.headers.authorization', 'req.headers.cookie'], censor: '[REDACTED]' },
  };
  const logger = destination ? pino(options, destination) : pino(options);
  app.useLogger(new NestPinoLogger(logger));
  // At `silent` no hook: it would log nothing, yet cost every request its work.
  if (config.logLevel === 'silent') return;
  // The line is built when the request ends, and only when its level is on: a request logger made
  // up front (pino-http's child logger, the serialised request) cost every request about 70 µs,
  // logged or not.
  const fastify = app.getHttpAdapter().getInstance();
  fastify.addHook('onResponse', (req, reply, done) => {
    logRequest(logger, req, reply);
    done();
  });
  fastify.addHook('onRequestAbort', (req, done) => {
    logRequest(logger, req);
    done();
  });
}

/** The request's line, at its `requestLevel`. */
function logRequest(logger: Pino, req: FastifyRequest, reply?: FastifyReply): void {
  const status = reply?.statusCode;
  const level = requestLevel(status);
  if (!logger.isLevelEnabled(level)) return;
  const line = {
    req: {
      id: req.id,
      method: req.method,
      ...loggedUrl(req.url),
      remoteAddress: req.raw.socket?.remoteAddress,
      headers: Object.fromEntries(
        LOGGED_HEADERS.filter((h) => req.headers[h]).map((h) => [h, req.headers[h]]),
      ),
    },
    res: reply && { statusCode: status },
    responseTime: reply && Math.round(reply.elapsedTime),
  };
  logger[level](
    line,
    !reply ? 'request aborted' : level === 'error' ? 'request errored' : 'request completed',
  );
}

/**
 * NestJS's Logger (`new Logger('Reconciler').warn(…)`) written through pino: Nest passes the
 * logger's name last, which becomes `context`; an object first argument is merged into the line.
 */
const NEST_START_UP = new Set([
  'NestFactory',
  'InstanceLoader',
  'RoutesResolver',
  'RouterExplorer',
  'NestApplication',
]);

class NestPinoLogger implements LoggerService {
  constructor(private readonly pino: Pino) {}

  log(message: unknown, ...rest: unknown[]) {
    // Nest's start-up chatter (a line per module and per route: about 100) is for debugging only.
    const context = rest[rest.length - 1];
    this.write(typeof context === 'string' && NEST_START_UP.has(context) ? 'debug' : 'info', message, rest);
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
