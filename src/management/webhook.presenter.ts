import { presentWebhook } from '../factories/factory.presenter.js';
import type { ManagedWebhookRow } from './management.repository.js';
import type { WebhookWithSecret } from './webhook-management.service.js';

/** A webhook as the list shows it, plus its factory, description and whether it awaits its secret. */
export function presentManagedWebhook(w: ManagedWebhookRow, base: string) {
  return {
    ...presentWebhook(w, base),
    factory_uid: w.factory_uid,
    ...(w.description ? { description: w.description } : {}),
    awaiting_secret: w.awaiting_secret,
  };
}

/** `{webhook, secret?}`: the secret only when factoryd generated it in this request. */
export function presentWithSecret(out: WebhookWithSecret, base: string) {
  return {
    webhook: presentManagedWebhook(out.webhook, base),
    ...(out.secret !== undefined ? { secret: out.secret } : {}),
  };
}
