import { github } from './github.verifier.js';
import { gitlab } from './gitlab.verifier.js';
import { linear } from './linear.verifier.js';
import { pagerduty } from './pagerduty.verifier.js';
import { sentry } from './sentry.verifier.js';
import { shopify } from './shopify.verifier.js';
import { slack } from './slack.verifier.js';
import { standardWebhooks } from './standard-webhooks.verifier.js';
import { stripe } from './stripe.verifier.js';
import type { SignatureScheme } from './verifier.js';
import { vercel } from './vercel.verifier.js';

export type { SignatureScheme, SignedRequest, Verdict } from './verifier.js';

/** Every `signatureScheme` a webhook may name. */
export const SIGNATURE_SCHEMES: Readonly<Record<string, SignatureScheme>> = {
  standard_webhooks: standardWebhooks,
  github,
  stripe,
  slack,
  shopify,
  gitlab,
  linear,
  sentry,
  pagerduty,
  vercel,
};
