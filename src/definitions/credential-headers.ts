/**
 * Headers that may carry a credential: never stored with a delivery, never matchable by a header
 * filter (a definition naming one is refused). Pure: used by the definition rules, the ingress and
 * Test filter alike.
 */

/** Headers that carry a credential, or a URL that may hold a url_token, by exact name. */
const CREDENTIAL_HEADERS = new Set([
  'authorization',
  'proxy-authorization',
  'cookie',
  'set-cookie',
  'x-original-url',
  'x-original-uri',
  'x-forwarded-uri',
  'x-forwarded-url',
  'x-rewrite-url',
  'x-envoy-original-path',
  'referer',
]);

/**
 * …and by a word of their name: every provider's signature header (`x-hub-signature-256`,
 * `stripe-signature`, `webhook-signature`, `x-shopify-hmac-sha256`, `x-gitlab-token`, …) and the
 * usual homes of API keys and tokens.
 */
const CREDENTIAL_WORD =
  /(^|-)(auth|authorization|cookie|signature|signatures|sig|hmac|token|secret|password|apikey|api-key)(-|$)/;

/** True when a header of this name may carry a credential: never stored, never matchable. */
export function isCredentialHeader(name: string): boolean {
  const lower = name.toLowerCase();
  return CREDENTIAL_HEADERS.has(lower) || CREDENTIAL_WORD.test(lower);
}
