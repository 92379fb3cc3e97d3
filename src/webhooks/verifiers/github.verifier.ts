import { verify } from '@octokit/webhooks-methods';
import { fail, header, OK, utf8, type SignatureScheme } from './verifier.js';

/** GitHub: `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>` (checked by @octokit/webhooks-methods). */
export const github: SignatureScheme = {
  deliveryHeaders: ['x-github-delivery'],
  async verify(secret, req) {
    const signature = header(req, 'x-hub-signature-256');
    if (!signature) return fail('the X-Hub-Signature-256 header is missing');
    if (!/^sha256=[0-9a-f]{64}$/.test(signature))
      return fail('X-Hub-Signature-256 is not sha256=<64 hex digits>');
    const body = utf8(req.body);
    if (body === undefined || body === '') return fail('the body is empty or not valid UTF-8');
    return (await verify(secret, body, signature)) ? OK : fail('the signature does not match');
  },
};
