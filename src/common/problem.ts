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
