import { describe, expect, it } from 'vitest';
import { parseCron, type CronParse } from './cron.js';

const at = (iso: string) => new Date(iso);
const next = (p: CronParse, after: string) => {
  if ('error' in p) throw new Error(p.error);
  return p.schedule.next(at(after))?.toISOString();
};

describe('parseCron (UTC)', () => {
  it.each([
    ['0 9 * * *', '2026-11-24T08:59:59Z', '2026-11-24T09:00:00.000Z'],
    ['0 9 * * *', '2026-11-24T09:00:00Z', '2026-11-25T09:00:00.000Z'],
    ['*/15 * * * *', '2026-11-24T09:07:00Z', '2026-11-24T09:15:00.000Z'],
    ['0 9 * * MON-FRI', '2026-11-28T10:00:00Z', '2026-11-30T09:00:00.000Z'],
    // Vixie cron: with both day fields restricted, either matches (the 1st, or a Monday).
    ['0 0 1 * 1', '2026-11-24T00:00:00Z', '2026-11-30T00:00:00.000Z'],
    ['@hourly', '2026-11-24T09:00:00Z', '2026-11-24T10:00:00.000Z'],
    ['@daily', '2026-11-24T09:00:00Z', '2026-11-25T00:00:00.000Z'],
    ['@weekly', '2026-11-24T09:00:00Z', '2026-11-29T00:00:00.000Z'],
    ['@monthly', '2026-11-24T09:00:00Z', '2026-12-01T00:00:00.000Z'],
    ['@yearly', '2026-11-24T09:00:00Z', '2027-01-01T00:00:00.000Z'],
    ['@annually', '2026-11-24T09:00:00Z', '2027-01-01T00:00:00.000Z'],
    ['@every 15m', '2026-11-24T09:07:30Z', '2026-11-24T09:15:00.000Z'],
    ['@every 1h', '2026-11-24T09:00:00Z', '2026-11-24T10:00:00.000Z'],
    ['@every 1h30m', '2026-11-24T00:00:00Z', '2026-11-24T01:30:00.000Z'],
  ])('%s after %s is %s', (expr, after, expected) => {
    expect(next(parseCron(expr), after)).toBe(expected);
  });

  it.each([
    ['', /empty/],
    ['* * * *', /has 4 fields.*exactly 5/],
    ['0 * * * * *', /has 6 fields/],
    ['61 * * * *', /Invalid value for minute: 61/],
    ['0 9 * * FOO', /not a valid cron expression/],
    ['0 0 31 2 *', /never fires/],
    ['@fortnightly', /not a known nickname/],
    ['@every', /not a valid @every/],
    ['@every 10s', /not a valid @every/],
    ['@every 0m', /between 1m and/],
    ['@every 9000h', /between 1m and/],
  ])('refuses %j with the reason', (expr, reason) => {
    const p = parseCron(expr);
    expect('error' in p && p.error).toMatch(reason);
  });
});
