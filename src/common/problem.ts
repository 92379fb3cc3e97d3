/**
 * One error type per failure kind. Each carries the contract's machine code and HTTP status; the
 * ProblemFilter maps them (and everything else) to RFC 7807 problem+json in one place.
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
export const DATABASE_RETRY_AFTER_SECONDS = 2;

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
 * 503 with Retry-After. Undefined for anything else (a bug: the caller answers 500 and logs it). The
 * one place both the API's filter and the ingress map errors.
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

export function problemBody(err: ApiError, instance?: string, traceId?: string): ProblemBody {
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
