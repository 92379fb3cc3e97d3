import { describe, expect, it } from 'vitest';
import type { FactoryDefinition, WebhookDefinition } from '../definitions/definition.js';
import { fieldsOf, isEmpty, planChanges, sameJson, summarize, type AppliedState } from './plan.js';

const hook: WebhookDefinition = {
  name: 'ci',
  path: 'webhooks/ci.yaml',
  authMode: 'token',
  secretName: 's',
  enabled: true,
};
const def = (webhooks: WebhookDefinition[]): FactoryDefinition => ({
  name: 'f',
  agentDefaults: {},
  agents: [
    { name: 'lead', path: 'agents/lead/agent.md', agentType: 'FOREMAN', overrides: {}, basePrompt: 'Lead.' },
  ],
  automations: [],
  webhooks,
  skills: [],
});
const applied = (pinned: string, deleted = false): AppliedState => ({
  agents: [
    {
      id: 'a1',
      path: 'agents/lead/agent.md',
      name: 'lead',
      deleted: false,
      fields: fieldsOf.agent(def([]).agents[0]),
    },
  ],
  automations: [],
  skills: [],
  webhooks: [
    {
      id: 'w1',
      uid: 'U',
      path: hook.path,
      name: 'ci',
      deleted,
      secretVersionId: pinned,
      fields: fieldsOf.webhook(hook),
    },
  ],
});

describe('planChanges', () => {
  it('is empty when the definition equals what is applied', () => {
    expect(isEmpty(planChanges(def([hook]), applied('v1'), new Map([['s', 'v1']]), true))).toBe(true);
  });

  it('re-pins a secret only for a new revision', () => {
    const versions = new Map([['s', 'v2']]);
    expect(isEmpty(planChanges(def([hook]), applied('v1'), versions, false))).toBe(true);
    expect(summarize(planChanges(def([hook]), applied('v1'), versions, true)).webhooks.updated).toEqual([
      'ci',
    ]);
  });

  it('tombstones a removed file and creates (revives) a file whose row is a tombstone', () => {
    expect(planChanges(def([]), applied('v1'), new Map(), true).webhooks.delete).toEqual([
      'webhooks/ci.yaml',
    ]);
    const revived = planChanges(def([hook]), applied('v1', true), new Map([['s', 'v1']]), true);
    expect(revived.webhooks.create.map((w) => w.name)).toEqual(['ci']);
  });

  it('updates on any field change', () => {
    const plan = planChanges(
      def([{ ...hook, enabled: false }]),
      applied('v1'),
      new Map([['s', 'v1']]),
      false,
    );
    expect(summarize(plan).webhooks).toEqual({ created: [], updated: ['ci'], deleted: [] });
  });
});

describe('sameJson', () => {
  it('ignores key order and undefined keys, not values or types', () => {
    expect(sameJson({ a: 1, b: [1, { c: 2 }] }, { b: [1, { c: 2 }], a: 1 })).toBe(true);
    expect(sameJson({ a: 1, x: undefined }, { a: 1 })).toBe(true);
    expect(sameJson({ a: '1' }, { a: 1 })).toBe(false);
    expect(sameJson([1, 2], [2, 1])).toBe(false);
  });
});
