import { describe, expect, it } from 'vitest';
import { SchemaRegistry } from '../common/schema-validator.js';
import { parseDefinitionFile } from '../definitions/definition-file.js';
import { generatedSecretKind, writeWebhookFile } from './webhook-file.js';

describe('writeWebhookFile', () => {
  it('writes a new file in the schema’s key order, quoting what YAML needs quoted', () => {
    const text = writeWebhookFile('', {
      authMode: 'signature',
      signatureScheme: 'github',
      secretName: 'webhook-gh',
      enabled: false,
      description: 'Issues: #1 and a: b',
    });
    expect(text).toBe(
      'authMode: signature\nsignatureScheme: github\nsecretName: webhook-gh\nenabled: false\ndescription: "Issues: #1 and a: b"\n',
    );
    const file = parseDefinitionFile('webhook', 'gh', 'webhooks/gh.yaml', text, new SchemaRegistry());
    expect(file.errors).toEqual([]);
    expect(file.source.data).toMatchObject({ description: 'Issues: #1 and a: b', enabled: false });
  });

  it('changes only the given fields of an existing file, keeps comments, removes null ones', () => {
    const before =
      '# The CI job\nauthMode: token\nsecretName: ci # shared\ndeliveryIdHeader: X-Id\nenabled: true\n';
    expect(writeWebhookFile(before, { enabled: false, deliveryIdHeader: null })).toBe(
      '# The CI job\nauthMode: token\nsecretName: ci # shared\nenabled: false\n',
    );
    expect(writeWebhookFile(before, {})).toBe(before);
  });
});

describe('generatedSecretKind', () => {
  it('token kinds and Standard Webhooks are generated; provider-issued secrets are not', () => {
    expect(generatedSecretKind('token', undefined)).toBe('token');
    expect(generatedSecretKind('url_token', undefined)).toBe('url-safe');
    expect(generatedSecretKind('signature', 'standard_webhooks')).toBe('whsec');
    for (const scheme of [
      'github',
      'stripe',
      'slack',
      'shopify',
      'gitlab',
      'linear',
      'sentry',
      'pagerduty',
      'vercel',
    ])
      expect(generatedSecretKind('signature', scheme)).toBeUndefined();
  });
});
