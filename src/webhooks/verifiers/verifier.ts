import { createHmac, timingSafeEqual } from 'node:crypto';

/** What a signature check sees: the exact raw bytes, the request headers, and the time it was received. */
export interface SignedRequest {
  body: Buffer;
  /** Lower-cased names, as Node gives them. */
  headers: Readonly<Record<string, string | string[] | undefined>>;
  now: Date;
}

export type Verdict = { ok: true } | { ok: false; reason: string };

/** One signing scheme: a pure check of a request against the webhook's secret. */
export interface SignatureScheme {
  verify(secret: string, req: SignedRequest): Verdict | Promise<Verdict>;
  /** The provider's own delivery id headers, first present wins (a delivery's identity). */
  deliveryHeaders?: readonly string[];
}

/** A signed timestamp may be this far in the past or the future. */
export const TOLERANCE_SECONDS = 5 * 60;

export const OK: Verdict = { ok: true };
export const fail = (reason: string): Verdict => ({ ok: false, reason });

/** The single value of a header; absent, empty or repeated headers count as missing. */
export function header(req: SignedRequest, name: string): string | undefined {
  const v = req.headers[name];
  return typeof v === 'string' && v !== '' ? v : undefined;
}

export function hmac(
  algorithm: 'sha256' | 'sha1',
  key: string | Buffer,
  ...parts: (string | Buffer)[]
): Buffer {
  const h = createHmac(algorithm, key);
  for (const p of parts) h.update(p);
  return h.digest();
}

/** Constant-time comparison of two strings (different lengths are unequal without a timing leak of content). */
export function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** Whether a hex digest given by the sender matches the expected bytes. */
export function hexMatches(given: string, expected: Buffer): boolean {
  return /^[0-9a-fA-F]+$/.test(given) && safeEqual(given.toLowerCase(), expected.toString('hex'));
}

/** Checks a Unix timestamp in seconds (digits only) against the clock, 5 minutes either way. */
export function checkTimestamp(value: string | undefined, now: Date): Verdict {
  if (value === undefined) return fail('the signed timestamp header is missing');
  if (!/^\d{1,12}$/.test(value)) return fail('the signed timestamp is not a Unix time in seconds');
  const skew = Number(value) - Math.floor(now.getTime() / 1000);
  if (skew < -TOLERANCE_SECONDS) return fail('the signed timestamp is more than 5 minutes old');
  if (skew > TOLERANCE_SECONDS) return fail('the signed timestamp is more than 5 minutes in the future');
  return OK;
}

/** The body as text, or undefined when it is not valid UTF-8 (libraries that sign strings cannot verify it). */
export function utf8(body: Buffer): string | undefined {
  try {
    return new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(body);
  } catch {
    return undefined;
  }
}
