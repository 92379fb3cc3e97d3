import type { IncomingHttpHeaders } from 'node:http';
import { isCredentialHeader } from '../definitions/credential-headers.js';

/** Headers worth keeping in the log: what identifies and describes a delivery, never a credential. */
const KEPT_HEADERS = [
  'content-type',
  'content-length',
  'content-encoding',
  'user-agent',
  'x-service-delivery-id',
  'x-github-event',
  'x-github-delivery',
  'x-github-hook-id',
  'webhook-id',
  'webhook-timestamp',
  'svix-id',
  'svix-timestamp',
  'x-gitlab-event',
  'x-gitlab-event-uuid',
  'idempotency-key',
  'x-shopify-topic',
  'x-shopify-webhook-id',
  'x-shopify-shop-domain',
  'linear-delivery',
  'linear-event',
  'sentry-hook-resource',
  'sentry-hook-timestamp',
  'request-id',
  'x-webhook-id',
  'x-slack-request-timestamp',
  'x-slack-retry-num',
];

/**
 * A stored header value is clipped to this many characters; all of a request's headers together are
 * bounded by Node's maxHeaderSize (16 KB), so the stored ones are too.
 */
const MAX_KEPT_HEADER_CHARS = 512;

/**
 * The headers stored with a delivery, and the ones its header filters see (so the ingress, a replay
 * and Test filter judge the same values): KEPT_HEADERS, the webhook's delivery id header and the
 * headers its triggers filter on (hook.keptHeaders), never a credential, each value clipped.
 */
export function keptHeaders(
  headers: IncomingHttpHeaders,
  hook: { keptHeaders: readonly string[] },
): Record<string, string> {
  const kept: Record<string, string> = {};
  for (const name of hook.keptHeaders) {
    const v = headers[name];
    if (typeof v === 'string') kept[name] = v.slice(0, MAX_KEPT_HEADER_CHARS);
  }
  return kept;
}

/** The names of the headers a webhook stores: see keptHeaders. */
export function keptHeaderNames(deliveryIdHeader: string | undefined, filtered: Iterable<string>): string[] {
  const names = new Set(KEPT_HEADERS);
  if (deliveryIdHeader) names.add(deliveryIdHeader.toLowerCase());
  for (const name of filtered) names.add(name.toLowerCase());
  return [...names].filter((name) => !isCredentialHeader(name));
}
