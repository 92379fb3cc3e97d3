import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Time-limited download links (the Oz clients' `download_url`): an HMAC over what the link opens and
 * when it expires, keyed by a key derived from the service's secrets key, so any replica checks it and
 * nothing is stored. A link can be fetched without an API key until it expires.
 */
export class UrlSigner {
  private readonly key: Buffer;

  constructor(secretsKey: Buffer) {
    // Its own key: a signature never doubles as anything sealed with the secrets key.
    this.key = createHmac('sha256', secretsKey).update('factoryd:download-url:v1').digest();
  }

  sign(subject: string, expiresAt: Date): { expires: string; signature: string } {
    const expires = String(Math.floor(expiresAt.getTime() / 1000));
    return { expires, signature: this.mac(subject, expires) };
  }

  /** Whether the signature is this subject's and the link has not expired at `now`. */
  verify(subject: string, expires: string | undefined, signature: string | undefined, now: Date): boolean {
    if (!expires || !signature || !/^\d{1,12}$/.test(expires)) return false;
    if (Number(expires) * 1000 <= now.getTime()) return false;
    const want = Buffer.from(this.mac(subject, expires));
    const got = Buffer.from(signature);
    return got.length === want.length && timingSafeEqual(got, want);
  }

  private mac(subject: string, expires: string): string {
    return createHmac('sha256', this.key).update(`${subject}\n${expires}`).digest('base64url');
  }
}
