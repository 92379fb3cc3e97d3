import { fail, header, hexMatches, hmac, OK, TOLERANCE_SECONDS, type SignatureScheme } from './verifier.js';

/**
 * Linear: `Linear-Signature: <hex HMAC-SHA256 of the body>`. The signed timestamp is the body's
 * `webhookTimestamp` (milliseconds); when present it must be within 5 minutes of now.
 */
export const linear: SignatureScheme = {
  deliveryHeaders: ['linear-delivery'],
  verify(secret, req) {
    const signature = header(req, 'linear-signature');
    if (!signature) return fail('the Linear-Signature header is missing');
    if (!hexMatches(signature, hmac('sha256', secret, req.body))) return fail('the signature does not match');
    const match = /"webhookTimestamp"\s*:\s*(-?\d+)/.exec(req.body.toString('utf8'));
    if (match) {
      const skew = Math.abs(Number(match[1]) - req.now.getTime()) / 1000;
      if (skew > TOLERANCE_SECONDS) return fail('webhookTimestamp is more than 5 minutes from now');
    }
    return OK;
  },
};
