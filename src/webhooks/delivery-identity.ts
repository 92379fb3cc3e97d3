import { createHash } from 'node:crypto';

/** Identities longer than this are replaced by the `sha256:` of the header value (keeps the index small). */
const MAX_IDENTITY = 200;

/**
 * A delivery's identity, first that applies (docs/webhooks.md): the webhook's `deliveryIdHeader`; for
 * `signature` webhooks the provider's delivery header; `X-Service-Delivery-Id`; else `sha256:<hex of body>`.
 */
export function deliveryIdentity(
  headers: Readonly<Record<string, string | string[] | undefined>>,
  body: Buffer,
  candidates: readonly string[],
): string {
  for (const name of [...candidates, 'x-service-delivery-id']) {
    const v = headers[name];
    const value = typeof v === 'string' ? v.trim() : undefined;
    if (value) return value.length <= MAX_IDENTITY ? value : `sha256:${sha256(Buffer.from(value))}`;
  }
  return `sha256:${sha256(body)}`;
}

function sha256(data: Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}
