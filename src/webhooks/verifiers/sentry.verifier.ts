import { fail, header, hexMatches, hmac, OK, type SignatureScheme } from './verifier.js';

/** Sentry integrations: `Sentry-Hook-Signature: <hex HMAC-SHA256 of the body>` keyed by the client secret. */
export const sentry: SignatureScheme = {
  deliveryHeaders: ['request-id'],
  verify(secret, req) {
    const signature = header(req, 'sentry-hook-signature');
    if (!signature) return fail('the Sentry-Hook-Signature header is missing');
    return hexMatches(signature, hmac('sha256', secret, req.body))
      ? OK
      : fail('the signature does not match');
  },
};
