import { MAX_WEBHOOKS, type WebhookDefinition } from '../definition.js';
import type { DefinitionFile } from '../definition-file.js';
import { dataOf, isValid, type Findings, type ValidationContext } from './rule.js';
import { setSecretCommand } from '../../secrets/secret-commands.js';

/** Header names a delivery id may not come from: credentials, cookies and signatures. */
export const RESERVED_DELIVERY_ID_HEADERS = new Set([
  'authorization',
  'proxy-authorization',
  'cookie',
  'set-cookie',
  'x-hub-signature',
  'x-hub-signature-256',
  'stripe-signature',
  'webhook-signature',
  'webhook-timestamp',
  'svix-signature',
  'svix-timestamp',
  'x-slack-signature',
  'x-slack-request-timestamp',
  'x-shopify-hmac-sha256',
  'x-gitlab-token',
  'linear-signature',
  'sentry-hook-signature',
  'x-pagerduty-signature',
  'x-vercel-signature',
]);
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$/;

/**
 * webhooks/<name>.yaml: at most MAX_WEBHOOKS, a delivery id header that is a header and carries no
 * credential, and (with the service) a team secret that exists and, for url_token, is URL-safe.
 */
export function checkWebhooks(
  files: DefinitionFile[],
  findings: Findings,
  ctx: ValidationContext,
): WebhookDefinition[] {
  const webhooks = files.map((f, i) => {
    const d = dataOf<WebhookDefinition>(f);
    const w: WebhookDefinition = {
      name: f.name,
      path: f.source.path,
      authMode: d.authMode ?? 'token',
      signatureScheme: d.signatureScheme,
      secretName: d.secretName ?? '',
      deliveryIdHeader: d.deliveryIdHeader,
      enabled: d.enabled ?? true,
      description: d.description,
    };
    if (i === MAX_WEBHOOKS) {
      findings.error(
        w.path,
        1,
        `a factory has at most ${MAX_WEBHOOKS} webhooks and this one has ${files.length}: remove ${files.length - MAX_WEBHOOKS} (this is the first beyond the limit, in name order)`,
      );
    }
    checkDeliveryIdHeader(f, findings);
    if (isValid(f) && ctx.secrets) checkSecret(f, w, findings, ctx, ctx.secrets);
    return w;
  });
  if (!ctx.secrets && files.length) findings.unchecked('team secrets (secretName)', ctx);
  return webhooks;
}

/** Checked even in a file that failed its schema: the header is the one field people get wrong. */
function checkDeliveryIdHeader(f: DefinitionFile, findings: Findings): void {
  const header = (f.source.data as { deliveryIdHeader?: unknown } | undefined)?.deliveryIdHeader;
  if (typeof header !== 'string') return;
  const line = f.source.lineOf(['deliveryIdHeader']);
  if (!HEADER_NAME.test(header)) {
    findings.error(f.source.path, line, `deliveryIdHeader "${header}" is not a valid HTTP header name`);
  } else if (RESERVED_DELIVERY_ID_HEADERS.has(header.toLowerCase())) {
    findings.error(
      f.source.path,
      line,
      `deliveryIdHeader may not be ${header}: it carries a credential or a signature, not a delivery id`,
    );
  }
}

function checkSecret(
  f: DefinitionFile,
  w: WebhookDefinition,
  findings: Findings,
  ctx: ValidationContext,
  secrets: NonNullable<ValidationContext['secrets']>,
): void {
  const secret = secrets.get(w.secretName);
  const line = f.source.lineOf(['secretName']);
  if (!secret) {
    findings.error(
      w.path,
      line,
      `secret "${w.secretName}" does not exist${ctx.team ? ` in team ${ctx.team}` : ''}: create it with ${setSecretCommand(w.secretName, { team: ctx.team, generate: w.authMode === 'token' ? 'token' : w.authMode === 'url_token' ? 'url-safe' : undefined })}${w.authMode === 'signature' ? ' (it asks for the provider’s signing secret)' : ''}`,
    );
  } else if (w.authMode === 'url_token' && !secret.urlSafe) {
    findings.error(
      w.path,
      line,
      `secret "${w.secretName}" is not URL-safe (only A-Z a-z 0-9 . _ ~ -), so it cannot be a url_token: set a new value with ${setSecretCommand(w.secretName, { team: ctx.team, generate: 'url-safe' })}`,
    );
  }
}
