import { fail, header, OK, safeEqual, type SignatureScheme } from './verifier.js';

/** GitLab signs nothing: it sends the secret token itself in `X-Gitlab-Token`. */
export const gitlab: SignatureScheme = {
  deliveryHeaders: ['idempotency-key', 'x-gitlab-event-uuid'],
  verify(secret, req) {
    const token = header(req, 'x-gitlab-token');
    if (!token) return fail('the X-Gitlab-Token header is missing');
    return safeEqual(token, secret) ? OK : fail('X-Gitlab-Token does not match');
  },
};
