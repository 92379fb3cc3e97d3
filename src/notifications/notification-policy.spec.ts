import { describe, expect, it } from 'vitest';
import { endpointUrlProblem, isPrivateAddress } from '../common/outbound-url.js';
import { nextAttemptDelay, receiverFailing } from './notification-policy.js';

describe('endpoint URLs', () => {
  it('needs https unless private URLs are allowed', () => {
    expect(endpointUrlProblem('https://hooks.example.com/x', false)).toBeUndefined();
    expect(endpointUrlProblem('http://hooks.example.com/x', false)).toMatch(/https/);
    expect(endpointUrlProblem('http://127.0.0.1:9/x', true)).toBeUndefined();
    expect(endpointUrlProblem('ftp://example.com/', true)).toMatch(/http/);
    expect(endpointUrlProblem('not a url', true)).toMatch(/absolute/);
    expect(endpointUrlProblem('https://u:p@example.com/', false)).toMatch(/credentials/);
  });

  it('refuses loopback, private and link-local destinations by default (SSRF)', () => {
    for (const url of [
      'https://127.0.0.1/',
      'https://localhost/',
      'https://10.1.2.3/',
      'https://169.254.169.254/latest/meta-data',
      'https://[::1]/',
      'https://[::ffff:192.168.0.1]/',
    ])
      expect(endpointUrlProblem(url, false), url).toMatch(/private/);
    expect(endpointUrlProblem('https://93.184.216.34/', false)).toBeUndefined();
  });

  it('classifies addresses', () => {
    expect(
      ['172.16.0.1', '192.168.1.1', '100.64.0.1', '0.0.0.0', 'fd00::1', 'fe80::1'].every(isPrivateAddress),
    ).toBe(true);
    expect(['8.8.8.8', '172.32.0.1', '2606:4700::1111'].some(isPrivateAddress)).toBe(false);
    // Documentation and protocol ranges, as IPv6's 2001:db8::/32 is; their neighbours are public.
    for (const a of [
      '192.0.0.8',
      '192.0.2.1',
      '192.88.99.1',
      '198.51.100.7',
      '203.0.113.200',
      '::ffff:203.0.113.1',
    ])
      expect(isPrivateAddress(a), a).toBe(true);
    for (const a of ['192.0.3.1', '198.51.101.1', '203.0.114.1', '192.88.98.1'])
      expect(isPrivateAddress(a), a).toBe(false);
  });

  it('reads the IPv4 address inside IPv6 forms, and refuses NAT64 and Teredo whole (issue #32, 8)', () => {
    const privateOnes = [
      '::7f00:1', // compatible 127.0.0.1, as URL parsing writes ::127.0.0.1
      '::127.0.0.1',
      '::a9fe:a9fe', // 169.254.169.254
      '::ffff:7f00:1',
      '::ffff:0:7f00:1', // translated
      '2002:7f00:1::', // 6to4 of 127.0.0.1
      '2002:a9fe:a9fe::1',
      '64:ff9b::7f00:1', // NAT64
      '64:ff9b:1::8.8.8.8',
      '2001:0:4136:e378:8000:63bf:3fff:fdd2', // Teredo
      'fec0::1',
      '::',
      '::1',
    ];
    for (const a of privateOnes) expect(isPrivateAddress(a), a).toBe(true);
    expect(['::808:808', '2002:808:808::1', '2a00:1450:4001:81b::200e'].some(isPrivateAddress)).toBe(false);
  });
});

describe('the retry schedule', () => {
  it('gives the pause before the next attempt until the schedule is spent', () => {
    const schedule = [0, 5_000, 300_000];
    expect(nextAttemptDelay(schedule, 1)).toBe(5_000);
    expect(nextAttemptDelay(schedule, 2)).toBe(300_000);
    expect(nextAttemptDelay(schedule, 3)).toBeUndefined();
  });
});

describe('a failed attempt', () => {
  it('fails the receiver unless its status refuses that one message only', () => {
    for (const status of [null, 500, 502, 503, 408, 429, 401, 403, 404, 410])
      expect(receiverFailing(status)).toBe(true);
    for (const status of [400, 409, 413, 415, 422]) expect(receiverFailing(status)).toBe(false);
  });
});
