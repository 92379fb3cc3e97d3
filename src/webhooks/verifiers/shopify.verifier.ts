import { fail, header, hmac, OK, safeEqual, type SignatureScheme } from './verifier.js';

/** Shopify: `X-Shopify-Hmac-Sha256: <base64 HMAC-SHA256 of the body>`. */
export const shopify: SignatureScheme = {
  deliveryHeaders: ['x-shopify-webhook-id'],
  verify(secret, req) {
    const signature = header(req, 'x-shopify-hmac-sha256');
    if (!signature) return fail('the X-Shopify-Hmac-Sha256 header is missing');
    const expected = hmac('sha256', secret, req.body).toString('base64');
    return safeEqual(signature, expected) ? OK : fail('the signature does not match');
  },
};
