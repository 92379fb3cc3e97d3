import { describe, expect, it } from 'vitest';
import { SchemaRegistry } from '../common/schema-validator.js';
import { resolveAgentConfig } from './agent-config.js';
import { formatError } from './definition.js';
import { loadDefinition, type ValidationContext } from './validate-definition.js';

const schemas = new SchemaRegistry();
const UID = 'AbCdEfGhIjKlMnOpQrStUv';
const GONE = 'ZyXwVuTsRqPoNmLkJiHgFe';

const base: Record<string, string> = {
  'factory.yaml': 'schemaVersion: v1alpha1\nname: acme\nagentDefaults:\n  model: m1\n',
  'agents/lead/agent.md': '---\nagentType: FOREMAN\n---\nLead.\n',
  'agents/fixer/agent.md': '---\ndescription: fixes\noverrides:\n  model: m2\n---\nFix.\n',
  'webhooks/ci.yaml': 'secretName: ci-secret\n',
};
const online: ValidationContext = {
  knownWebhooks: [
    { uid: UID, name: 'ci', path: 'webhooks/ci.yaml', deleted: false },
    { uid: GONE, name: 'old', path: 'webhooks/old.yaml', deleted: true },
  ],
  secrets: new Map([
    ['ci-secret', { urlSafe: true }],
    ['plain', { urlSafe: false }],
  ]),
  team: 'default',
};

function check(files: Record<string, string | null>, ctx: ValidationContext = online) {
  const tree = new Map(
    Object.entries({ ...base, ...files }).filter((e): e is [string, string] => e[1] !== null),
  );
  const result = loadDefinition(tree, schemas, ctx);
  return { ...result, lines: result.errors.map(formatError) };
}

const trigger = (ids: string, payload = '') =>
  `---\nagent: fixer\ntriggers:\n  - provider: webhook\n    event: received\n    filter:\n      webhook_ids: ${ids}\n${payload}---\nDo it.\n`;

describe('factory definition validation', () => {
  it('accepts a valid factory and resolves defaults', () => {
    const r = check({
      'automations/fix/automation.md': trigger(`[${UID}]`, '      payload:\n        action: [opened]\n'),
    });
    expect(r.lines).toEqual([]);
    expect(r.definition!.automations[0]).toMatchObject({
      name: 'fix',
      agent: 'fixer',
      enabled: true,
      prompt: 'Do it.',
    });
    const fixer = r.definition!.agents.find((a) => a.name === 'fixer')!;
    expect(resolveAgentConfig(r.definition!.agentDefaults, fixer)).toEqual({
      name: 'fixer',
      model_id: 'm2',
      base_prompt: 'Fix.',
    });
  });

  it('reports YAML syntax errors with their line', () => {
    expect(check({ 'webhooks/ci.yaml': 'secretName: a\nauthMode: [token\n' }).lines[0]).toMatch(
      /^webhooks\/ci\.yaml:\d+: not valid YAML/,
    );
    expect(
      check({ 'agents/fixer/agent.md': '---\ndescription: ok\noverrides: {model: \n  x\n---\nbody' })
        .lines[0],
    ).toMatch(/^agents\/fixer\/agent\.md:\d: front matter is not valid YAML/);
  });

  it('names the line of an unknown key, a bad value and a missing field', () => {
    const r = check({
      'webhooks/ci.yaml': 'secretName: ci-secret\nenabled: true\ncolour: red\n',
      'agents/fixer/agent.md': '---\ndescription: fixes\nagentType: BOSS\n---\nFix.\n',
      'factory.yaml': 'schemaVersion: v1alpha1\n',
    });
    expect(r.lines).toContain(
      'webhooks/ci.yaml:3: colour is not a known field; the known fields are authMode, signatureScheme, secretName, deliveryIdHeader, enabled, description',
    );
    expect(r.lines).toContain(
      'agents/fixer/agent.md:3: agentType must be one of "FOREMAN", "CUSTOM", not "BOSS"',
    );
    expect(r.lines).toContain('factory.yaml:1: name is required');
  });

  // Each schema keyword in the contract's words, at the line of the key it is about.
  it.each([
    [
      'not: a key only one mode allows is named at its line, with the mode in use',
      'webhooks/ci.yaml',
      '# ci\ndescription: ci\nsecretName: ci-secret\nenabled: true\nauthMode: token\nsignatureScheme: github\n',
      'webhooks/ci.yaml:6: signatureScheme is only for authMode: signature (this webhook uses authMode: token); remove it or set authMode: signature',
    ],
    [
      'not: a mode left out is told with its default',
      'webhooks/ci.yaml',
      'secretName: ci-secret\nsignatureScheme: github\n',
      'webhooks/ci.yaml:2: signatureScheme is only for authMode: signature (this webhook uses authMode: token, the default); remove it or set authMode: signature',
    ],
    [
      'if/then: a key the mode needs is asked for at the mode, with its allowed values',
      'webhooks/ci.yaml',
      'secretName: ci-secret\nauthMode: signature\n',
      'webhooks/ci.yaml:2: signatureScheme is required with authMode: signature: set it to one of standard_webhooks, github, stripe, slack, shopify, gitlab, linear, sentry, pagerduty, vercel',
    ],
    [
      'enum: the allowed values and the value given',
      'webhooks/ci.yaml',
      'secretName: ci-secret\nauthMode: bearer\n',
      'webhooks/ci.yaml:2: authMode must be one of "token", "url_token", "signature", not "bearer"',
    ],
    [
      'type: the type wanted and the one given',
      'webhooks/ci.yaml',
      'secretName: ci-secret\nenabled: "yes"\n',
      'webhooks/ci.yaml:2: enabled must be boolean, not a string ("yes")',
    ],
    [
      'pattern: the rule in words and the value given',
      'webhooks/ci.yaml',
      'enabled: true\nsecretName: a b\n',
      'webhooks/ci.yaml:2: secretName must match ^[A-Za-z0-9_.-]{1,128}$ (A team secret (factoryd secrets set NAME).), not "a b"',
    ],
    [
      'required: the missing key',
      'factory.yaml',
      'schemaVersion: v1alpha1\n',
      'factory.yaml:1: name is required',
    ],
    [
      'additionalProperties: the unknown key at its line, with the known ones',
      'automations/fix/automation.md',
      '---\ntriggers:\n  - provider: webhook\n    event: received\n    type: push\n    filter:\n      webhook_ids: [x]\n---\nDo it.\n',
      'automations/fix/automation.md:5: triggers.0.type is not a known field; the known fields are provider, event, filter',
    ],
    [
      'oneOf: the allowed shapes in words, not why each failed',
      'automations/fix/automation.md',
      trigger(`[${UID}]`, '      payload:\n        action: 3\n'),
      'automations/fix/automation.md:9: triggers.0.filter.payload.action must match exactly one allowed shape (a bare array of values (= in), {in: [...]}, {not_in: [...]}, {exists: true|false}, or an object of nested field names)',
    ],
  ])('%s', (_, path, content, line) => {
    expect(check({ [path]: content }).lines).toContain(line);
  });

  it('accepts signatureScheme with authMode: signature', () => {
    expect(
      check({ 'webhooks/ci.yaml': 'authMode: signature\nsignatureScheme: github\nsecretName: ci-secret\n' })
        .lines,
    ).toEqual([]);
  });

  it('refuses a deliveryIdHeader that is not a header name or carries a credential or signature', () => {
    expect(
      check({ 'webhooks/ci.yaml': 'secretName: ci-secret\ndeliveryIdHeader: X-Request-Id\n' }).lines,
    ).toEqual([]);
    for (const h of ['Authorization', 'cookie', 'X-Hub-Signature-256', 'Stripe-Signature']) {
      expect(check({ 'webhooks/ci.yaml': `secretName: ci-secret\ndeliveryIdHeader: ${h}\n` }).lines).toEqual([
        `webhooks/ci.yaml:2: deliveryIdHeader may not be ${h}: it carries a credential or a signature, not a delivery id`,
      ]);
    }
    expect(check({ 'webhooks/ci.yaml': 'secretName: ci-secret\ndeliveryIdHeader: "X Id"\n' }).lines).toEqual([
      'webhooks/ci.yaml:2: deliveryIdHeader "X Id" is not a valid HTTP header name',
    ]);
  });

  it('wants exactly one foreman', () => {
    expect(check({ 'agents/zed/agent.md': '---\ndescription: x\nagentType: FOREMAN\n---\n' }).lines).toEqual([
      'agents/zed/agent.md:3: a factory has exactly one foreman, and agents/lead/agent.md already is one: make this agent CUSTOM',
    ]);
    expect(check({ 'agents/lead/agent.md': 'Lead.\n' }).lines).toEqual([
      'factory.yaml:1: no agent is the foreman: set `agentType: FOREMAN` in exactly one agents/<name>/agent.md',
    ]);
  });

  it('wants the agent an automation names to exist', () => {
    const r = check({
      'automations/fix/automation.md': trigger(`[${UID}]`).replace('agent: fixer', 'agent: ghost'),
    });
    expect(r.lines).toEqual([
      'automations/fix/automation.md:2: agent "ghost" does not exist; agents: fixer, lead',
    ]);
  });

  it('wants exactly one known webhook UID per trigger, with hints', () => {
    const path = 'automations/fix/automation.md';
    expect(check({ [path]: trigger(`[${UID}, ${UID}]`) }).lines).toEqual([
      `${path}:7: a trigger selects exactly one webhook UID; this one lists 2`,
    ]);
    expect(check({ [path]: trigger('[]') }).lines).toEqual([
      `${path}:7: a trigger selects exactly one webhook UID; this one lists none`,
    ]);
    expect(check({ [path]: trigger('[ci]') }).lines).toEqual([
      `${path}:7: "ci" is a file name, not a UID: use the UID ${UID} of webhooks/ci.yaml`,
    ]);
    expect(check({ [path]: trigger('\n        - webhooks/ci.yaml') }).lines).toEqual([
      `${path}:8: "webhooks/ci.yaml" is a file name, not a UID: use the UID ${UID} of webhooks/ci.yaml`,
    ]);
    expect(check({ [path]: trigger('[NoSuchUid000000000000]') }).lines).toEqual([
      `${path}:7: UID "NoSuchUid000000000000" is not a webhook of this factory; its webhooks: webhooks/ci.yaml (${UID})`,
    ]);
    // A deleted webhook's UID is fine: the automation stays and does not fire.
    expect(check({ [path]: trigger(`[${GONE}]`) }).lines).toEqual([]);
    // A webhook new in this commit has no UID yet.
    expect(
      check({ 'webhooks/new.yaml': 'secretName: ci-secret\n', [path]: trigger('[new]') }).lines[0],
    ).toMatch(
      /^automations\/fix\/automation\.md:7: "new" is a file name, not a UID, and webhooks\/new\.yaml has no UID until it first applies/,
    );
  });

  it('checks the filter grammar and its limits', () => {
    const path = 'automations/fix/automation.md';
    const bad = check({
      [path]: trigger(`[${UID}]`, '      payload:\n        action: {in: [a], not_in: [b]}\n'),
    });
    expect(bad.lines[0]).toMatch(
      /^automations\/fix\/automation\.md:9: triggers\.0\.filter\.payload\.action must match exactly one allowed shape/,
    );
    let deep = 'x';
    for (let i = 0; i < 8; i++) deep = `{f${i}: ${deep === 'x' ? '{exists: true}' : deep}}`;
    expect(check({ [path]: trigger(`[${UID}]`, `      payload:\n        a: ${deep}\n`) }).lines).toEqual([
      `${path}:8: payload filter nests 9 levels deep; the limit is 8`,
    ]);
    const keys = Array.from({ length: 65 }, (_, i) => `        k${i}: [1]`).join('\n');
    expect(check({ [path]: trigger(`[${UID}]`, `      payload:\n${keys}\n`) }).lines).toEqual([
      `${path}:8: payload filter has 65 keys; the limit is 64`,
    ]);
    const list = Array.from({ length: 101 }, (_, i) => i).join(', ');
    expect(
      check({ [path]: trigger(`[${UID}]`, `      payload:\n        n: {not_in: [${list}]}\n`) }).lines,
    ).toEqual([`${path}:8: payload filter has a list of 101 values; the limit is 100 per list`]);
    const big = Array.from({ length: 90 }, () => `"${'x'.repeat(90)}"`).join(', ');
    expect(check({ [path]: trigger(`[${UID}]`, `      payload:\n        n: [${big}]\n`) }).lines[0]).toMatch(
      /payload filter is \d+ bytes as JSON; the limit is 8192/,
    );
  });

  it('accepts a header filter, and refuses one on a credential header at the line of its key', () => {
    const path = 'automations/fix/automation.md';
    const ok = check({ [path]: trigger(`[${UID}]`, '      headers:\n        X-GitHub-Event: [push]\n') });
    expect(ok.lines).toEqual([]);
    expect(ok.definition?.automations[0]?.triggers[0]).toMatchObject({
      filter: { headers: { 'X-GitHub-Event': ['push'] } },
    });
    const refused = check({
      [path]: trigger(
        `[${UID}]`,
        '      headers:\n        X-GitHub-Event: [push]\n        authorization: {exists: true}\n        X-Hub-Signature-256: {exists: true}\n',
      ),
    });
    expect(refused.lines).toEqual([
      `${path}:10: header "authorization" may carry a credential, and credentials are never matchable (nor stored): filter on another header or on the payload`,
      `${path}:11: header "X-Hub-Signature-256" may carry a credential, and credentials are never matchable (nor stored): filter on another header or on the payload`,
    ]);
    // Header values are strings; a header filter has no nested fields.
    const shape = check({ [path]: trigger(`[${UID}]`, '      headers:\n        X-Count: [1]\n') });
    expect(shape.lines[0]).toMatch(
      /^automations\/fix\/automation\.md:9: triggers\.0\.filter\.headers\.X-Count/,
    );
  });

  it('allows at most 20 webhooks', () => {
    const many: Record<string, string> = {};
    for (let i = 0; i < 21; i++)
      many[`webhooks/w${String(i).padStart(2, '0')}.yaml`] = 'secretName: ci-secret\n';
    expect(check(many).lines).toEqual([
      'webhooks/w19.yaml:1: a factory has at most 20 webhooks and this one has 22: remove 2 (this is the first beyond the limit, in name order)',
    ]);
  });

  it('wants secrets that exist, URL-safe for url_token', () => {
    expect(check({ 'webhooks/ci.yaml': 'authMode: token\nsecretName: nope\n' }).lines).toEqual([
      'webhooks/ci.yaml:2: secret "nope" does not exist in team default: create it with `npx factoryd secrets set nope --team default --generate token`',
    ]);
    expect(check({ 'webhooks/ci.yaml': 'authMode: url_token\nsecretName: plain\n' }).lines[0]).toMatch(
      /^webhooks\/ci\.yaml:2: secret "plain" is not URL-safe/,
    );
  });

  it('offline: skips secret and UID checks but still catches a file name', () => {
    const r = check(
      { 'automations/fix/automation.md': trigger('[SomeUid]'), 'webhooks/ci.yaml': 'secretName: nope\n' },
      {},
    );
    expect(r.lines).toEqual([]);
    expect(r.skipped).toHaveLength(2);
    expect(check({ 'automations/fix/automation.md': trigger('[ci]') }, {}).lines[0]).toMatch(
      /"ci" is a file name, not a UID/,
    );
  });

  it('reports misplaced files and every error at once, sorted', () => {
    const r = check({
      'agents/loose.md': 'x',
      'webhooks/a.yml': 'x',
      'webhooks/ci.yaml': 'secretName: nope\nzzz: 1\n',
    });
    expect(r.lines).toEqual([
      'agents/loose.md:1: an agent is a folder: move it to agents/loose/agent.md',
      'webhooks/a.yml:1: rename to webhooks/a.yaml',
      'webhooks/ci.yaml:2: zzz is not a known field; the known fields are authMode, signatureScheme, secretName, deliveryIdHeader, enabled, description',
    ]);
    expect(r.definition).toBeUndefined();
  });
});
