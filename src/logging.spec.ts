import { describe, expect, it } from 'vitest';
import { loggedUrl, requestLevel } from './logging.js';

describe('what a request line holds', () => {
  it('the path and the names of the query parameters, never their values (issue #32, 8)', () => {
    expect(loggedUrl('/api/v1/runs?api_key=fdk_secret&limit=2&api_key=again')).toEqual({
      url: '/api/v1/runs',
      query: ['api_key', 'limit'],
    });
    expect(loggedUrl('/webhooks/w/abc/tok3n?x=1')).toEqual({
      url: '/webhooks/w/abc/[REDACTED]',
      query: ['x'],
    });
    expect(loggedUrl('/healthz')).toEqual({ url: '/healthz' });
  });

  it('answered requests at debug (issue #30, 4), a 503 at warn (the service is away for a while, as docs/operations.md says), other 5xx at error', () => {
    expect([200, 404, 429, 500, 502, 503, 504, undefined].map(requestLevel)).toEqual([
      'debug',
      'warn',
      'warn',
      'error',
      'error',
      'warn',
      'error',
      'debug',
    ]);
  });
});
