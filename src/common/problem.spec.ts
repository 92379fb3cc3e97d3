import { describe, expect, it } from 'vitest';
import { ApiError, expectedProblem, isDatabaseUnreachable, NotFound } from './problem.js';

/** Errors as node-postgres, Node's sockets and TypeORM raise them. */
const pgError = (code: string, message = 'x') =>
  Object.assign(new Error(message), { code, severity: 'FATAL' });

describe('isDatabaseUnreachable', () => {
  it.each([
    [
      'a refused connection',
      Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }),
    ],
    ['a reset socket', Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' })],
    ['a socket that ended', new Error('Connection terminated unexpectedly')],
    [
      'a client used after its connection failed',
      new Error('Client has encountered a connection error and is not queryable'),
    ],
    ['pg_terminate_backend', pgError('57P01', 'terminating connection due to administrator command')],
    ['a crash of another backend', pgError('57P02')],
    [
      'a server starting, stopping or recovering',
      pgError('57P03', 'the database system is in recovery mode'),
    ],
    ['a connection exception (class 08)', pgError('08006')],
    ['too many connections', pgError('53300')],
    ['a wrapped one (cause)', new Error('apply failed', { cause: pgError('57P01') })],
    ['TypeORM’s QueryFailedError', Object.assign(new Error('q'), { driverError: pgError('08003') })],
    [
      'an AggregateError of refusals',
      new AggregateError([Object.assign(new Error('r'), { code: 'ECONNREFUSED' })]),
    ],
  ])('%s: yes', (_what, err) => {
    expect(isDatabaseUnreachable(err)).toBe(true);
  });

  it.each([
    ['a unique violation', pgError('23505')],
    ['a syntax error', pgError('42601')],
    ['a statement timeout', pgError('57014')],
    ['a plain bug', new TypeError('x is undefined')],
    ['not an error', 'Connection terminated'],
    ['nothing', undefined],
  ])('%s: no', (_what, err) => {
    expect(isDatabaseUnreachable(err)).toBe(false);
  });
});

describe('expectedProblem', () => {
  it('keeps an ApiError, makes a lost database a retryable 503 with Retry-After, and leaves bugs alone', () => {
    const notFound = new NotFound('no such run');
    expect(expectedProblem(notFound)).toBe(notFound);
    const unavailable = expectedProblem(pgError('57P01'));
    expect(unavailable).toBeInstanceOf(ApiError);
    expect(unavailable).toMatchObject({ status: 503, code: 'service_unavailable' });
    expect(unavailable?.options).toMatchObject({ retryable: true, retryAfter: 2 });
    expect(expectedProblem(new TypeError('bug'))).toBeUndefined();
  });
});
