import { describe, expect, it } from 'vitest';
import { baseUrlRule, parseBaseUrl, untrustedInternalBaseUrl } from './base-url.js';

describe("a team's provider base URL", () => {
  it.each([
    ['https://gateway.example.com/anthropic/', 'https://gateway.example.com/anthropic'],
    ['  https://Gateway.Example.com  ', 'https://gateway.example.com'],
    ['http://127.0.0.1:4567/v1', 'http://127.0.0.1:4567/v1'],
  ])('takes %j as %j', (text, stored) => expect(parseBaseUrl(text)).toBe(stored));

  it.each([
    ['', /absolute URL of at most/],
    ['gateway.example.com/v1', /not an absolute URL/],
    ['ftp://gateway.example.com', /must start with https:\/\//],
    ['file:///etc/passwd', /must start with https:\/\//],
    ['https://user:hunter2@gateway.example.com', /must not carry a user name or password/],
    ['https://token@gateway.example.com', /must not carry a user name or password/],
    ['https://gateway.example.com/v1?key=x', /no query/],
    ['https://gateway.example.com/v1#x', /no query/],
    ['https://gateway.example.com/a b', /without spaces/],
    [`https://gateway.example.com/${'a'.repeat(2100)}`, /at most 2048/],
  ])('refuses %j', (text, message) => {
    expect(() => parseBaseUrl(text)).toThrow(message);
    expect(() => parseBaseUrl(text)).toThrow(/^(?!.*hunter2)/);
  });

  it.each([
    'http://127.0.0.1:5432',
    'http://localhost:3000',
    'http://api.localhost',
    'http://169.254.169.254/latest',
    'http://10.0.0.5',
    'https://192.168.1.1',
    'http://[::1]:8080',
    'http://[::ffff:7f00:1]',
    'http://0.0.0.0:80',
  ])('refuses %j unless the operator trusts that host and port', (url) => {
    const u = parseBaseUrl(url);
    expect(untrustedInternalBaseUrl(u, [])).toMatch(
      /loopback, private or link-local address .*HARNESS_EGRESS_TRUST/,
    );
    expect(untrustedInternalBaseUrl(u, [baseUrlRule(u) as { host: string; port: number }])).toBeUndefined();
  });

  it('a trust of another port on the same host does not cover it', () => {
    expect(untrustedInternalBaseUrl('http://127.0.0.1:5432', [{ host: '127.0.0.1', port: 4567 }])).toMatch(
      /127\.0\.0\.1:5432/,
    );
  });

  it('leaves a public host to the egress proxy (its addresses are checked when the CLI connects)', () => {
    expect(untrustedInternalBaseUrl('https://gateway.example.com', [])).toBeUndefined();
    expect(baseUrlRule('https://gateway.example.com/v1')).toEqual({ host: 'gateway.example.com', port: 443 });
    expect(baseUrlRule('http://[2001:4860::1]:8080')).toEqual({ host: '2001:4860::1', port: 8080 });
  });
});
