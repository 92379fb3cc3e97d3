import { Document, parseDocument } from 'yaml';
import type { WebhookFile } from '../contract/generated.js';
import type { AuthMode } from '../definitions/definition.js';
import type { SecretKind } from '../secrets/secret-generator.js';

/**
 * The fields of `webhooks/<name>.yaml` (schemas/webhook.schema.json, the generated `WebhookFile`), in
 * the file's own spelling; null removes one.
 */
export type WebhookFileFields = { [K in keyof WebhookFile]?: WebhookFile[K] | null };

const ORDER: Array<keyof WebhookFileFields> = [
  'authMode',
  'signatureScheme',
  'secretName',
  'deliveryIdHeader',
  'enabled',
  'description',
];

/**
 * `content` (a webhook file; empty for a new one) with `fields` set, and removed where `null`.
 * Comments and the other keys are kept, so a person's edits to a managed file survive.
 */
export function writeWebhookFile(content: string, fields: WebhookFileFields): string {
  const doc: Document = content.trim() ? parseDocument(content) : new Document({});
  for (const key of ORDER) {
    const value = fields[key];
    if (value === undefined) continue;
    if (value === null) doc.delete(key);
    else doc.set(key, value);
  }
  return doc.toString();
}

/**
 * The secret factoryd generates for a webhook, by auth mode and scheme (docs/webhooks.md): token and
 * url_token always; a Standard Webhooks sender takes a `whsec_` secret it is given. Every other
 * signature scheme uses the secret its provider issues (undefined: the caller must give it).
 */
export function generatedSecretKind(
  authMode: AuthMode,
  scheme: string | null | undefined,
): SecretKind | undefined {
  if (authMode === 'token') return 'token';
  if (authMode === 'url_token') return 'url-safe';
  return scheme === 'standard_webhooks' ? 'whsec' : undefined;
}

/** A Standard Webhooks secret: `whsec_` and the base64 key. */
export const WHSEC = /^whsec_[A-Za-z0-9+/]+={0,2}$/;
