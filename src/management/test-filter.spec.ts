import { describe, expect, it } from 'vitest';
import { testFilter } from './test-filter.js';

const UID = 'A'.repeat(22);
const OTHER = 'B'.repeat(22);
const webhook = { uid: UID, name: 'github', enabled: true, deleted: false };
const trigger = (uid: string, payload?: Record<string, unknown>) => ({
  provider: 'webhook',
  event: 'received',
  filter: { webhook_ids: [uid], ...(payload ? { payload } : {}) },
});
const body = (payload: unknown, headers: Record<string, string> = {}) => ({ payload, headers });
const automation = (triggers: unknown[], enabled = true) => ({
  automation: { name: 'triage', path: 'automations/triage/automation.md', enabled, triggers },
});

describe('testFilter', () => {
  it('would trigger when a trigger selects the webhook and its payload filter passes', () => {
    const out = testFilter(
      webhook,
      body({ action: 'opened' }),
      automation([trigger(UID, { action: ['opened'] })]),
    );
    expect(out).toEqual({
      result: 'would_trigger',
      webhook_check: { passed: true, message: `automation triage has a trigger on webhook github (${UID})` },
      payload_check: {
        passed: true,
        message: 'the payload matches the payload filter of triggers[0]',
        mismatches: [],
        paths: ['action'],
      },
      header_check: {
        passed: true,
        message: 'triggers[0] has no header filter: every delivery passes',
        headers: [],
      },
    });
  });

  it('explains the closest of several triggers, and passes when any one matches', () => {
    const triggers = [
      trigger(UID, { action: ['closed'], label: { exists: true } }),
      trigger(UID, { action: ['closed'] }),
    ];
    const miss = testFilter(webhook, body({ action: 'opened' }), automation(triggers));
    expect(miss.payload_check.message).toBe(
      '1 condition of the payload filter fails: action (triggers[1], the closest of 2 triggers)',
    );
    const hit = testFilter(webhook, body({ action: 'closed' }), automation(triggers));
    expect(hit.payload_check).toMatchObject({
      passed: true,
      message: expect.stringContaining('triggers[1]'),
    });
  });

  it('fails the webhook check, saying every reason: deleted or disabled webhook, disabled automation, no trigger here', () => {
    const out = testFilter({ ...webhook, enabled: false }, body({}), automation([trigger(OTHER)], false));
    expect(out.result).toBe('would_not_trigger');
    expect(out.webhook_check.message).toBe(
      `webhook github is disabled: senders get 404 until it is enabled; automation triage is disabled (enabled: false in automations/triage/automation.md); automation triage has no trigger on this webhook (${UID}); its triggers select ${OTHER}`,
    );
    expect(out.payload_check.passed).toBe(true); // explained against the triggers it has
    expect(testFilter({ ...webhook, deleted: true }, body({}), { filter: {} }).webhook_check.message).toMatch(
      /was deleted/,
    );
    expect(testFilter(webhook, body({}), automation([])).payload_check).toEqual({
      passed: false,
      message: 'automation triage has no webhook trigger',
      mismatches: [],
      paths: [],
    });
  });

  it('a given filter: webhook_ids must be exactly this webhook; without them it is tested as one on this webhook', () => {
    expect(testFilter(webhook, body({}), { filter: { webhook_ids: [UID] } }).result).toBe('would_trigger');
    expect(testFilter(webhook, body({}), { filter: {} }).webhook_check.message).toMatch(
      /names no webhook_ids/,
    );
    expect(testFilter(webhook, body({}), { filter: { webhook_ids: [UID, OTHER] } }).webhook_check).toEqual({
      passed: false,
      message: 'a trigger selects exactly one webhook UID; this filter lists 2',
    });
    expect(testFilter(webhook, body('text'), { filter: { payload: {} } }).payload_check).toEqual({
      passed: false,
      message: 'the payload is not a JSON object, and a payload filter matches only objects',
      mismatches: [],
      paths: [],
    });
  });

  it('explains each header path of a header filter: names case-insensitive, missing headers fail `in`', () => {
    const filter = { headers: { 'X-GitHub-Event': ['push'], 'X-GitHub-Hook-Id': { exists: true } } };
    const push = testFilter(webhook, body({}, { 'x-github-event': 'push', 'x-github-hook-id': '7' }), {
      filter,
    });
    expect(push.result).toBe('would_trigger');
    expect(push.header_check).toEqual({
      passed: true,
      message: 'the headers match the header filter of the filter: x-github-event, x-github-hook-id',
      headers: [
        { path: 'x-github-event', passed: true, actual: 'push', mismatches: [] },
        { path: 'x-github-hook-id', passed: true, actual: '7', mismatches: [] },
      ],
    });
    const pr = testFilter(webhook, body({}, { 'x-github-event': 'pull_request' }), { filter });
    expect(pr.result).toBe('would_not_trigger');
    expect(pr.payload_check.passed).toBe(true);
    expect(pr.header_check).toEqual({
      passed: false,
      message: '2 headers of the header filter fail: x-github-event, x-github-hook-id',
      headers: [
        {
          path: 'x-github-event',
          passed: false,
          actual: 'pull_request',
          mismatches: [
            {
              path: 'x-github-event',
              condition: 'in',
              expected: ['push'],
              actual: 'pull_request',
              present: true,
            },
          ],
        },
        {
          path: 'x-github-hook-id',
          passed: false,
          mismatches: [{ path: 'x-github-hook-id', condition: 'exists', expected: true, present: false }],
        },
      ],
    });
  });
});
