/**
 * One error type per failure kind. Each carries the contract's machine code and HTTP status;
 * `problemResponse` maps them (and everything else) to RFC 7807 problem+json in one place.
 */
export type ErrorCode =
  | 'invalid_request'
  | 'authentication_required'
  | 'not_authorized'
  | 'resource_not_found'
  | 'method_not_allowed'
  | 'conflict'
  | 'payload_too_large'
  | 'operation_not_supported'
  | 'rate_limited'
  | 'internal_error'
  | 'service_unavailable';

export interface ProblemOptions {
  retryable?: boolean;
  /** Seconds; sent as Retry-After on 429 and 503. */
  retryAfter?: number;
  headers?: Record<string, string>;
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: ErrorCode,
    readonly title: string,
    readonly detail?: string,
    readonly options: ProblemOptions = {},
  ) {
    super(detail ?? title);
  }
}

export class InvalidRequest extends ApiError {
  constructor(detail: string) {
    super(400, 'invalid_request', 'Invalid request', detail);
  }
}

/**
 * 400 naming each bad field or parameter: `detail` joins the reasons, `invalid_params` lists them for
 * programs (`[{name, reason}]`).
 */
export class RequestInvalid extends ApiError {
  constructor(readonly violations: Array<{ path: string; message: string }>) {
    super(400, 'invalid_request', 'Invalid request', violations.map((v) => v.message).join('; '));
  }
}

/** A 400 for one query parameter or field. */
export function invalidParam(name: string, message: string): RequestInvalid {
  return new RequestInvalid([{ path: name, message }]);
}

export class AuthenticationRequired extends ApiError {
  constructor(detail = 'Send an API key as "Authorization: Bearer <key>".') {
    super(401, 'authentication_required', 'Authentication required', detail);
  }
}

export class NotAuthorized extends ApiError {
  constructor(detail: string) {
    super(403, 'not_authorized', 'Not authorized', detail);
  }
}

export class NotFound extends ApiError {
  constructor(detail: string) {
    super(404, 'resource_not_found', 'Resource not found', detail);
  }
}

export class Conflict extends ApiError {
  constructor(detail: string, retryable = false) {
    super(409, 'conflict', 'Conflict', detail, { retryable });
  }
}

export class RateLimited extends ApiError {
  constructor(detail: string, retryAfterSeconds: number) {
    super(429, 'rate_limited', 'Too many requests', detail, {
      retryable: true,
      retryAfter: retryAfterSeconds,
    });
  }
}

export class OperationNotSupported extends ApiError {
  constructor(detail: string) {
    super(400, 'operation_not_supported', 'Operation not supported', detail);
  }
}

/** Seconds a caller waits before retrying while the database is out of reach. */
const DATABASE_RETRY_AFTER_SECONDS = 2;

/** 503 + Retry-After: the database is out of reach (restarting, a connection cut); nothing was changed. */
export class ServiceUnavailable extends ApiError {
  constructor(detail: string, retryAfterSeconds = DATABASE_RETRY_AFTER_SECONDS) {
    super(503, 'service_unavailable', 'Service unavailable', detail, {
      retryable: true,
      retryAfter: retryAfterSeconds,
    });
  }
}

/** Socket errors of a connection that could not be made or was cut. */
const CONNECTION_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
]);
/**
 * SQLSTATEs of a server that is gone or not taking us: class 08 (connection exception), 57P01-57P03
 * (terminated by an administrator, by a crash of another backend, cannot connect now: starting, stopping,
 * recovering), 53300 (too many connections).
 */
const UNAVAILABLE_SQLSTATES = /^(08...|57P0[123]|53300)$/;
/** What node-postgres says, without a code, when its socket ends under it or it is handed a dead client. */
const CONNECTION_MESSAGES = /^Connection terminated|not queryable/i;

/**
 * True when `err` (or what it wraps: `cause`, TypeORM's `driverError`, an AggregateError's errors) says
 * the database could not be reached or the connection was lost: a fault of the moment, not of the
 * request, which a retry after a short wait may get through.
 */
export function isDatabaseUnreachable(err: unknown, depth = 0): boolean {
  if (!err || typeof err !== 'object' || depth > 5) return false;
  const e = err as {
    code?: unknown;
    message?: unknown;
    cause?: unknown;
    driverError?: unknown;
    errors?: unknown;
  };
  if (typeof e.code === 'string' && (CONNECTION_CODES.has(e.code) || UNAVAILABLE_SQLSTATES.test(e.code)))
    return true;
  if (typeof e.message === 'string' && CONNECTION_MESSAGES.test(e.message)) return true;
  const inner = [e.cause, e.driverError, ...(Array.isArray(e.errors) ? e.errors : [])];
  return inner.some((i) => isDatabaseUnreachable(i, depth + 1));
}

/**
 * The answer an error stands for when it is one we expect: an ApiError as it is, a lost database as a
 * 503 with Retry-After. Undefined for anything else.
 */
export function expectedProblem(err: unknown): ApiError | undefined {
  if (err instanceof ApiError) return err;
  if (isDatabaseUnreachable(err))
    return new ServiceUnavailable('The database could not be reached just now; retry after a moment.');
  return undefined;
}

export interface ProblemBody {
  type: string;
  title: string;
  status: number;
  detail?: string;
  instance?: string;
  error: ErrorCode;
  retryable?: boolean;
  trace_id?: string;
}

function problemBody(err: ApiError, instance?: string, traceId?: string): ProblemBody {
  const body: ProblemBody = {
    type: `urn:factoryd:error:${err.code}`,
    title: err.title,
    status: err.status,
    error: err.code,
  };
  if (err.detail !== undefined) body.detail = err.detail;
  if (instance !== undefined) body.instance = instance;
  if (err.options.retryable !== undefined) body.retryable = err.options.retryable;
  if (traceId !== undefined) body.trace_id = traceId;
  return body;
}

/** Framework errors (Fastify's, Nest's HttpException) by their status. */
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

/** What the answer to a failed request is made from. */
export interface ProblemRequest {
  method: string;
  /** The path without the query string (named in a 404 for an unknown route). */
  path: string;
  /** The body's `instance`: the path when undefined, none when null (a path holding a URL token). */
  instance?: string | null;
  traceId: string;
  /** The route's body limit, named when a body was too large. */
  bodyLimit?: number;
}

export interface ProblemResponse {
  status: number;
  /** Content-Type, and Retry-After on 429 and 503. */
  headers: Record<string, string>;
  body: ProblemBody & { invalid_params?: Array<{ name: string; reason: string }> };
  /** Set when the error deserves a log line (a lost database: warn; a bug: error). */
  log?: { level: 'warn' | 'error'; message: string };
}

/**
 * Every error to the RFC 7807 problem+json answer it stands for, in one place for the API (Nest's
 * ProblemFilter) and the webhook ingress (raw Fastify routes). Our ApiErrors carry their own code; a
 * lost database is a 503 with Retry-After; framework errors (unknown route, malformed JSON, body too
 * large) are mapped by status; anything else is a 500 whose body says nothing of the internals (the
 * log has it, under the same trace id).
 */
export function problemResponse(err: unknown, req: ProblemRequest): ProblemResponse {
  let problem = expectedProblem(err);
  let log: ProblemResponse['log'];
  if (problem) {
    if (!(err instanceof ApiError)) log = { level: 'warn', message: 'database unreachable: answered 503' };
  } else {
    const status = statusOf(err);
    if (status !== undefined && status < 500 && BY_STATUS[status]) {
      const [code, title] = BY_STATUS[status];
      problem = new ApiError(status, code, title, detailOf(err, status, req));
    } else if (status === 503) {
      problem = new ApiError(503, 'service_unavailable', 'Service unavailable', undefined, {
        retryAfter: 5,
        retryable: true,
      });
    } else {
      log = { level: 'error', message: 'unhandled error' };
      problem = new ApiError(
        500,
        'internal_error',
        'Internal server error',
        `Something went wrong on our side; quote trace id ${req.traceId} when reporting it.`,
        { retryable: true },
      );
    }
  }
  const body: ProblemResponse['body'] = problemBody(
    problem,
    req.instance === undefined ? req.path : (req.instance ?? undefined),
    req.traceId,
  );
  if (problem instanceof RequestInvalid)
    body.invalid_params = problem.violations.map((v) => ({ name: v.path, reason: v.message }));
  const headers: Record<string, string> = { 'Content-Type': 'application/problem+json' };
  if (problem.options.retryAfter !== undefined) headers['Retry-After'] = String(problem.options.retryAfter);
  Object.assign(headers, problem.options.headers);
  return { status: problem.status, headers, body, ...(log ? { log } : {}) };
}

/** Nest's HttpException (getStatus) or Fastify's errors (statusCode). */
function statusOf(err: unknown): number | undefined {
  const e = err as { getStatus?: unknown; statusCode?: unknown } | null | undefined;
  if (typeof e?.getStatus === 'function') return (e.getStatus as () => number)();
  return typeof e?.statusCode === 'number' ? e.statusCode : undefined;
}

function detailOf(err: unknown, status: number, req: ProblemRequest): string {
  if (status === 404) return `No route ${req.method} ${req.path}.`;
  // Nest wraps Fastify's own errors (FST_ERR_…) in an HttpException whose cause is the original.
  const fastifyError = err as { code?: string; cause?: { code?: string } };
  const code = fastifyError.code ?? fastifyError.cause?.code;
  if (
    code === 'FST_ERR_CTP_INVALID_JSON' ||
    code === 'FST_ERR_CTP_EMPTY_JSON_BODY' ||
    err instanceof SyntaxError
  )
    return 'The request body is not valid JSON.';
  if (code === 'FST_ERR_CTP_BODY_TOO_LARGE')
    return `The request body is larger than ${req.bodyLimit} bytes, the most this route accepts.`;
  if (code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') return 'Send the body as application/json.';
  const message = err instanceof Error ? err.message : undefined;
  return message ?? BY_STATUS[status][1];
}
