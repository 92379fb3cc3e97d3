import { checkTimestamp, fail, header, hexMatches, hmac, OK, type SignatureScheme } from './verifier.js';

/** Slack: `X-Slack-Signature: v0=<hex HMAC-SHA256 of "v0:<X-Slack-Request-Timestamp>:<body>">`. */
export const slack: SignatureScheme = {
  verify(secret, req) {
    const signature = header(req, 'x-slack-signature');
    if (!signature) return fail('the X-Slack-Signature header is missing');
    const timestamp = header(req, 'x-slack-request-timestamp');
    const time = checkTimestamp(timestamp, req.now);
    if (!time.ok) return time;
    if (!signature.startsWith('v0=')) return fail('X-Slack-Signature is not v0=<hex>');
    const expected = hmac('sha256', secret, `v0:${timestamp}:`, req.body);
    return hexMatches(signature.slice(3), expected) ? OK : fail('the signature does not match');
  },
};
