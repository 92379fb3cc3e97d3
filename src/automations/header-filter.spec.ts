import { describe, expect, it } from 'vitest';
import { isCredentialHeader } from '../definitions/credential-headers.js';
import { compileHeaderFilter, explainHeaderFilter, headerNames } from './header-filter.js';

describe('header filters', () => {
  it('match stored (lower-case) headers with the payload operators; names are case-insensitive', () => {
    const push = compileHeaderFilter({ 'X-GitHub-Event': ['push'], 'X-Debug': { exists: false } });
    expect(push({ 'x-github-event': 'push' })).toBe(true);
    expect(push({ 'x-github-event': 'pull_request' })).toBe(false);
    expect(push({})).toBe(false);
    expect(push({ 'x-github-event': 'push', 'x-debug': '1' })).toBe(false);
    expect(compileHeaderFilter({ 'x-github-event': { not_in: ['ping'] } })({})).toBe(true);
    expect(compileHeaderFilter(undefined)({})).toBe(true);
    expect(headerNames({ 'X-GitHub-Event': 'push' })).toEqual(['x-github-event']);
  });

  it('explain agrees with the compiled predicate, per header', () => {
    const filter = { 'x-github-event': 'push', 'user-agent': { not_in: ['curl'] } };
    const cases: Array<Record<string, string>> = [
      { 'x-github-event': 'push' },
      { 'x-github-event': 'ping', 'user-agent': 'curl' },
      {},
    ];
    for (const headers of cases) {
      const explained = explainHeaderFilter(filter, headers);
      expect(explained.passed).toBe(compileHeaderFilter(filter)(headers));
      expect(explained.outcomes.map((o) => o.path)).toEqual(['x-github-event', 'user-agent']);
    }
  });

  it('credential headers: authorization, cookies, every signature and token header, URLs that may hold a url_token', () => {
    for (const name of [
      'Authorization',
      'proxy-authorization',
      'Cookie',
      'X-Hub-Signature-256',
      'x-hub-signature',
      'Stripe-Signature',
      'webhook-signature',
      'svix-signature',
      'x-slack-signature',
      'X-Shopify-Hmac-Sha256',
      'X-Gitlab-Token',
      'linear-signature',
      'sentry-hook-signature',
      'x-pagerduty-signature',
      'x-vercel-signature',
      'x-api-key',
      'x-auth-token',
      'x-original-url',
    ])
      expect(isCredentialHeader(name), name).toBe(true);
    for (const name of [
      'x-github-event',
      'idempotency-key',
      'webhook-id',
      'x-slack-request-timestamp',
      'user-agent',
    ])
      expect(isCredentialHeader(name), name).toBe(false);
  });
});
