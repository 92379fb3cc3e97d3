import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { deliveryIdentity } from './delivery-identity.js';

const body = Buffer.from('{"a":1}');
const sha = (b: Buffer | string) => `sha256:${createHash('sha256').update(b).digest('hex')}`;

describe('deliveryIdentity, first that applies', () => {
  const headers = { 'x-my-id': 'mine', 'x-github-delivery': 'gh', 'x-service-delivery-id': 'svc' };
  it('the webhook’s own header, then the provider’s, then X-Service-Delivery-Id, then the body hash', () => {
    expect(deliveryIdentity(headers, body, ['x-my-id', 'x-github-delivery'])).toBe('mine');
    expect(deliveryIdentity(headers, body, ['x-github-delivery'])).toBe('gh');
    expect(deliveryIdentity(headers, body, [])).toBe('svc');
    expect(deliveryIdentity({}, body, ['x-my-id'])).toBe(sha(body));
  });
  it('skips empty headers and hashes very long values', () => {
    expect(deliveryIdentity({ 'x-service-delivery-id': '  ' }, body, [])).toBe(sha(body));
    const long = 'x'.repeat(201);
    expect(deliveryIdentity({ 'x-service-delivery-id': long }, body, [])).toBe(sha(long));
  });
});
