import { type ArgumentsHost, Catch, type ExceptionFilter, HttpException, Logger } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ApiError, type ErrorCode, expectedProblem, problemBody } from './problem.js';
import { RequestInvalid } from './request-validation.js';

const BY_STATUS: Record<number, [ErrorCode, string]> = {
  400: ['invalid_request', 'Invalid request'],
  401: ['authentication_required', 'Authentication required'],
  403: ['not_authorized', 'Not authorized'],
  404: ['resource_not_found', 'Resource not found'],
  405: ['method_not_allowed', 'Method not allowed'],
  409: ['conflict', 'Conflict'],
  413: ['payload_too_large', 'Payload too large'],
  415: ['invalid_request', 'Unsupported media type'],
  429: ['rate_limited', 'Too many requests'],
  503: ['service_unavailable', 'Service unavailable'],
};

/**
 * Every error leaves as RFC 7807 problem+json, here and nowhere else. Our ApiErrors carry their own
 * code; a lost database is a 503 with Retry-After (`expectedProblem`); framework errors (unknown
 * route, malformed JSON, body too large) are mapped by status; anything else is a 500 whose body says nothing of the internals (the log has it, under the same trace id).
 */
@Catch()
export class ProblemFilter implements ExceptionFilter {
  private readonly log = new Logger('ProblemFilter');

  catch(exception: unknown, host: ArgumentsHost): void {
    const ctx = host.switchToHttp();
    const req = ctx.getRequest<FastifyRequest>();
    const reply = ctx.getResponse<FastifyReply>();
    const err = this.toApiError(exception, req);
    const body: Record<string, unknown> = { ...problemBody(err, req.url.split('?')[0], String(req.id)) };
    if (err instanceof RequestInvalid) {
      body.invalid_params = err.violations.map((v) => ({ name: v.path, reason: v.message }));
    }
    if (err.options.retryAfter !== undefined) reply.header('Retry-After', String(err.options.retryAfter));
    for (const [name, value] of Object.entries(err.options.headers ?? {})) reply.header(name, value);
    void reply.status(err.status).header('Content-Type', 'application/problem+json').send(body);
  }

  private toApiError(exception: unknown, req: FastifyRequest): ApiError {
    const expected = expectedProblem(exception);
    if (expected) {
      if (!(exception instanceof ApiError))
        this.log.warn({ err: exception, reqId: req.id }, 'database unreachable: answered 503');
      return expected;
    }
    const status = statusOf(exception);
    if (status !== undefined && status < 500 && BY_STATUS[status]) {
      const [code, title] = BY_STATUS[status];
      return new ApiError(status, code, title, detailOf(exception, status, req));
    }
    if (status === 503)
      return new ApiError(503, 'service_unavailable', 'Service unavailable', undefined, {
        retryAfter: 5,
        retryable: true,
      });
    this.log.error({ err: exception, reqId: req.id }, 'unhandled error');
    return new ApiError(
      500,
      'internal_error',
      'Internal server error',
      `Something went wrong on our side; quote trace id ${String(req.id)} when reporting it.`,
      {
        retryable: true,
      },
    );
  }
}

function statusOf(exception: unknown): number | undefined {
  if (exception instanceof HttpException) return exception.getStatus();
  const s = (exception as { statusCode?: unknown })?.statusCode;
  return typeof s === 'number' ? s : undefined;
}

function detailOf(exception: unknown, status: number, req: FastifyRequest): string {
  if (status === 404) return `No route ${req.method} ${req.url.split('?')[0]}.`;
  // Nest wraps Fastify's own errors (FST_ERR_…) in an HttpException whose cause is the original.
  const fastifyError = exception as { code?: string; cause?: { code?: string } };
  const code = fastifyError.code ?? fastifyError.cause?.code;
  if (
    code === 'FST_ERR_CTP_INVALID_JSON' ||
    code === 'FST_ERR_CTP_EMPTY_JSON_BODY' ||
    exception instanceof SyntaxError
  ) {
    return 'The request body is not valid JSON.';
  }
  if (code === 'FST_ERR_CTP_BODY_TOO_LARGE')
    return `The request body is larger than ${req.routeOptions.bodyLimit} bytes, the most this route accepts.`;
  if (code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') return 'Send the body as application/json.';
  const message = exception instanceof Error ? exception.message : undefined;
  return message ?? BY_STATUS[status][1];
}
