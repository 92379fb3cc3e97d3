import { Webhook } from 'standardwebhooks';
import { checkTimestamp, fail, header, OK, safeEqual, utf8, type SignatureScheme } from './verifier.js';

/**
 * Standard Webhooks (and Svix, its `svix-*` header names): `v1,<base64 HMAC-SHA256 of id.timestamp.body>`,
 * keyed by the base64 part of a `whsec_` secret; several space-separated signatures (key rotation).
 * The HMAC comes from the `standardwebhooks` library; the clock is ours.
 */
export const standardWebhooks: SignatureScheme = {
  deliveryHeaders: ['webhook-id', 'svix-id'],
  verify(secret, req) {
    const prefix = header(req, 'webhook-id') !== undefined ? 'webhook' : 'svix';
    const id = header(req, `${prefix}-id`);
    const timestamp = header(req, `${prefix}-timestamp`);
    const signatures = header(req, `${prefix}-signature`);
    if (!id || !signatures) return fail(`the ${prefix}-id and ${prefix}-signature headers are required`);
    const time = checkTimestamp(timestamp, req.now);
    if (!time.ok) return time;
    const body = utf8(req.body);
    if (body === undefined) return fail('the body is not valid UTF-8');
    let expected: string;
    try {
      expected = new Webhook(secret).sign(id, new Date(Number(timestamp) * 1000), body).slice('v1,'.length);
    } catch {
      return fail('the webhook secret is not a valid whsec_ secret');
    }
    for (const candidate of signatures.split(' ')) {
      const comma = candidate.indexOf(',');
      if (comma < 0 || candidate.slice(0, comma) !== 'v1') continue;
      if (safeEqual(candidate.slice(comma + 1), expected)) return OK;
    }
    return fail('no v1 signature matches');
  },
};
