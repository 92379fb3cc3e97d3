import { fail, header, hexMatches, hmac, OK, type SignatureScheme } from './verifier.js';

/** PagerDuty v3: `X-PagerDuty-Signature: v1=<hex>[,v1=<hex>…]`, HMAC-SHA256 of the body; other versions ignored. */
export const pagerduty: SignatureScheme = {
  deliveryHeaders: ['x-webhook-id'],
  verify(secret, req) {
    const value = header(req, 'x-pagerduty-signature');
    if (!value) return fail('the X-PagerDuty-Signature header is missing');
    const expected = hmac('sha256', secret, req.body);
    const v1 = value
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s.startsWith('v1='));
    if (v1.length === 0) return fail('X-PagerDuty-Signature has no v1 signature');
    return v1.some((s) => hexMatches(s.slice(3), expected)) ? OK : fail('no v1 signature matches');
  },
};
