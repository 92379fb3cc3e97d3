import { fail, header, hexMatches, hmac, OK, type SignatureScheme } from './verifier.js';

/** Vercel: `x-vercel-signature: <hex HMAC-SHA1 of the body>`. */
export const vercel: SignatureScheme = {
  verify(secret, req) {
    const signature = header(req, 'x-vercel-signature');
    if (!signature) return fail('the x-vercel-signature header is missing');
    return hexMatches(signature, hmac('sha1', secret, req.body)) ? OK : fail('the signature does not match');
  },
};
