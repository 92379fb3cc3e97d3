import type { IncomingHttpHeaders } from 'node:http';
import { Inject, Injectable } from '@nestjs/common';
import { webhookRun } from '../automations/run-envelope.js';
import { Clock } from '../common/clock.js';
import { Metrics } from '../common/metrics.js';
import { newUuid } from '../common/ids.js';
import { InvalidRequest, NotFound, RateLimited } from '../common/problem.js';
import { findInputProblem, MAX_JSON_DEPTH } from '../common/storable.js';
import { Database } from '../database/database.js';
import { DeliveryCommits } from './delivery-commits.js';
import { deliveryIdentity } from './delivery-identity.js';
import { DeliveryLog, type DeliveryEntry, type DeliveryStatus } from './delivery-log.js';
import { PayloadTooLarge, WebhookAuthFailed } from './ingress-errors.js';
import { IngressLimits } from './ingress-limits.js';
import { keptHeaders } from './kept-headers.js';
import { safeEqual } from './verifiers/verifier.js';
import { WebhookDirectory, type LiveWebhook } from './webhook-directory.js';

/** Webhook UIDs: 22 characters [A-Za-z0-9]; anything else is unknown without asking the database. */
export const WEBHOOK_UID = /^[A-Za-z0-9]{22}$/;

/** 256 KiB: the largest body a webhook accepts. */
const MAX_BODY_BYTES = 262_144;

export type BodyRead = { body: Buffer } | { tooLarge: number };

/** One POST to /webhooks/w/<uid>[/<token>], as the HTTP layer hands it over. */
export interface IngressRequest {
  uid: string;
  urlToken?: string;
  headers: IncomingHttpHeaders;
  clientAddress: string;
  /** Content-Length as declared (may lie; never trusted for the limit). */
  declaredLength?: number;
  /** Reads the body, stopping (without buffering more) once it passes `limit` bytes. */
  readBody(limit: number): Promise<BodyRead>;
}

/**
 * The webhook ingress, docs/webhooks.md top to bottom: find the webhook, check the token, the size, the
 * signature (a failed check counts against the failed-auth budget, and a spent budget refuses the
 * request first whatever its credential), the rate limit, the JSON; then record the delivery and
 * start the runs of every matching automation in one transaction. Returns the delivery id for the
 * 202, which the caller sends only after that commit; every refusal is an ApiError.
 */
@Injectable()
export class IngressService {
  constructor(
    @Inject(WebhookDirectory) private readonly directory: WebhookDirectory,
    @Inject(IngressLimits) private readonly limits: IngressLimits,
    @Inject(DeliveryLog) private readonly log: DeliveryLog,
    @Inject(DeliveryCommits) private readonly commits: DeliveryCommits,
    @Inject(Database) private readonly db: Database,
    @Inject(Clock) private readonly clock: Clock,
    @Inject(Metrics) private readonly metrics: Metrics,
  ) {}

  /**
   * A delivery's answer, counted by the status it was logged with (`rate_limited`: refused before
   * any entry). Every way out of `receive` but an unknown webhook passes here once.
   */
  async receive(req: IngressRequest): Promise<string> {
    try {
      const { status, identity } = await this.take(req);
      this.metrics.deliveries.inc({ status });
      return identity;
    } catch (err) {
      const status = REFUSALS.find(([refusal]) => err instanceof refusal)?.[1];
      if (status) this.metrics.deliveries.inc({ status });
      throw err;
    }
  }

  private async take(req: IngressRequest): Promise<{ status: DeliveryStatus; identity: string }> {
    const receivedAt = this.clock.now();
    const hook = WEBHOOK_UID.test(req.uid) ? await this.directory.get(req.uid) : undefined;
    if (!hook) throw new NotFound(`No enabled webhook has the UID ${req.uid}.`);

    const headers = keptHeaders(req.headers, hook);
    const entry = (status: DeliveryStatus, extra: Partial<DeliveryEntry> = {}): DeliveryEntry => ({
      id: newUuid(),
      webhookId: hook.id,
      status,
      identity: null,
      sizeBytes: req.declaredLength ?? null,
      receivedAt,
      clientAddress: req.clientAddress,
      headers,
      ...extra,
    });

    if (hook.authMode !== 'signature') {
      const problem = this.checkToken(hook, req);
      if (problem) return this.rejectAuth(hook, req, entry('rejected_auth'), problem);
    }

    const read = await req.readBody(MAX_BODY_BYTES);
    if ('tooLarge' in read) {
      const wait = await this.limits.authBudgetSpent(hook.id, req.clientAddress);
      if (wait !== undefined) throw authBudgetSpent(wait);
      await this.log.record(this.db, [entry('rejected_too_large', { sizeBytes: read.tooLarge })]);
      throw new PayloadTooLarge(MAX_BODY_BYTES);
    }
    const body = read.body;
    const sized = (status: DeliveryStatus, extra: Partial<DeliveryEntry> = {}) =>
      entry(status, { sizeBytes: body.length, ...extra });

    if (hook.authMode === 'signature') {
      const verdict =
        hook.scheme && hook.secret
          ? await hook.scheme.verify(hook.secret, { body, headers: req.headers, now: receivedAt })
          : { ok: false as const, reason: 'this webhook has no signing secret or scheme configured' };
      if (!verdict.ok)
        return this.rejectAuth(
          hook,
          req,
          sized('rejected_auth'),
          `Signature check failed: ${verdict.reason}.`,
        );
    }

    const refusal = await this.limits.admitDelivery(hook.id, req.clientAddress);
    if (refusal?.reason === 'auth_budget') throw authBudgetSpent(refusal.retryAfter);
    if (refusal) {
      throw new RateLimited(
        'This webhook received too many deliveries in the last minute.',
        refusal.retryAfter,
      );
    }

    const identity = deliveryIdentity(req.headers, body, identityHeaders(hook));
    const json = parseJson(body);
    if ('refused' in json) {
      await this.commits.record({ entry: sized('rejected_invalid_json', { identity }), runs: [] });
      throw new InvalidRequest(json.refused);
    }
    const accepted = { ...sized('accepted', { identity }), payloadText: json.text };
    const delivery = {
      teamId: hook.teamId,
      webhookUid: hook.uid,
      webhookName: hook.name,
      identity,
      entryId: accepted.id,
      body,
    };
    const runs = hook.triggers
      .filter((t) => t.matches(json.value, headers))
      .map((t) => webhookRun(t, delivery));
    return { status: await this.commits.record({ entry: accepted, runs }), identity };
  }

  private checkToken(hook: LiveWebhook, req: IngressRequest): string | undefined {
    if (hook.authMode === 'url_token') {
      if (req.urlToken === undefined)
        return 'This webhook takes deliveries at its URL with the token: /webhooks/w/<uid>/<token>.';
      return hook.secret && safeEqual(req.urlToken, hook.secret) ? undefined : 'The URL token is wrong.';
    }
    if (req.urlToken !== undefined)
      return 'This webhook takes its secret in the Authorization header, not in the URL.';
    const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(req.headers.authorization ?? '');
    if (!match) return 'Send the webhook secret as "Authorization: Bearer <secret>".';
    return hook.secret && safeEqual(match[1]!, hook.secret) ? undefined : 'The bearer token is wrong.';
  }

  /** 401 and a Rejected (auth) entry; a 429 without one when the failed-auth budget was already spent. */
  private async rejectAuth(
    hook: LiveWebhook,
    req: IngressRequest,
    entry: DeliveryEntry,
    detail: string,
  ): Promise<never> {
    const wait = await this.limits.recordAuthFailure(hook.id, req.clientAddress);
    if (wait !== undefined) throw authBudgetSpent(wait);
    await this.log.record(this.db, [entry]);
    throw new WebhookAuthFailed(detail);
  }
}

/** The refusals `take` throws, each once its entry is logged, by the status it was logged with. */
const REFUSALS: Array<[new (...args: never[]) => Error, DeliveryStatus | 'rate_limited']> = [
  [WebhookAuthFailed, 'rejected_auth'],
  [PayloadTooLarge, 'rejected_too_large'],
  [InvalidRequest, 'rejected_invalid_json'],
  [RateLimited, 'rate_limited'],
];

function authBudgetSpent(retryAfter: number): RateLimited {
  return new RateLimited(
    'Too many failed authentication attempts from this address; try again later.',
    retryAfter,
  );
}

function identityHeaders(hook: LiveWebhook): string[] {
  const own = hook.deliveryIdHeader ? [hook.deliveryIdHeader] : [];
  return hook.authMode === 'signature' ? [...own, ...(hook.scheme?.deliveryHeaders ?? [])] : own;
}

/** Refuses invalid UTF-8 instead of replacing it; one instance serves every request (decode is stateless without `stream`). */
const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * The body's text and value when it is valid UTF-8 holding one JSON value (of any type) nested at
 * most MAX_JSON_DEPTH deep (deeper, the delivery log and Test filter could not serve it back); else
 * why not. NUL and lone surrogates are fine here: the payload is stored as the text received.
 */
function parseJson(body: Buffer): { text: string; value: unknown } | { refused: string } {
  let parsed: { text: string; value: unknown };
  try {
    const text = STRICT_UTF8.decode(body);
    parsed = { text, value: JSON.parse(text) as unknown };
  } catch {
    return { refused: 'The body is not valid JSON (an empty body is not JSON; `null` is).' };
  }
  const problem = findInputProblem(parsed.value, '', { depthOnly: true });
  if (problem)
    return {
      refused: `The body is valid JSON, but ${problem.message}; webhooks take at most ${MAX_JSON_DEPTH}.`,
    };
  return parsed;
}
