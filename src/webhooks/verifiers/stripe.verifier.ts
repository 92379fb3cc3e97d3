import { checkTimestamp, fail, header, hexMatches, hmac, OK, type SignatureScheme } from './verifier.js';

/** Stripe: `Stripe-Signature: t=<unix>,v1=<hex>[,v1=…]`, HMAC-SHA256 of `t.body`; other versions are ignored. */
export const stripe: SignatureScheme = {
  verify(secret, req) {
    const value = header(req, 'stripe-signature');
    if (!value) return fail('the Stripe-Signature header is missing');
    let t: string | undefined;
    const v1: string[] = [];
    for (const part of value.split(',')) {
      const eq = part.indexOf('=');
      const [k, v] = eq < 0 ? [part, ''] : [part.slice(0, eq).trim(), part.slice(eq + 1).trim()];
      if (k === 't') t = v;
      else if (k === 'v1') v1.push(v);
    }
    const time = checkTimestamp(t, req.now);
    if (!time.ok) return time;
    if (v1.length === 0) return fail('Stripe-Signature has no v1 signature');
    const expected = hmac('sha256', secret, `${t}.`, req.body);
    return v1.some((s) => hexMatches(s, expected)) ? OK : fail('no v1 signature matches');
  },
};
