import { explainPayloadFilter, type Mismatch } from '../automations/payload-filter.js';
import { webhookTriggers } from '../automations/trigger-index.js';

export interface Check {
  passed: boolean;
  message: string;
}

export interface FilterTestResult {
  result: 'would_trigger' | 'would_not_trigger';
  webhook_check: Check;
  payload_check: Check & { mismatches: Mismatch[] };
}

interface TestedWebhook {
  uid: string;
  name: string;
  enabled: boolean;
  deleted: boolean;
}

/** A trigger filter as a request gives it (the `filter` of an automation's webhook trigger). */
export interface GivenFilter {
  webhook_ids?: string[];
  payload?: Record<string, unknown>;
}

/**
 * Test filter: would a delivery of `payload` to `webhook` start a run of `automation` (its enabled
 * state and triggers), or pass `filter`? The webhook check says whether the trigger selects this
 * webhook (and that the webhook and automation are live); the payload check explains the payload
 * filter with the same semantics the ingress applies (explainPayloadFilter).
 */
export function testFilter(
  webhook: TestedWebhook,
  payload: unknown,
  target:
    | { automation: { name: string; path: string; enabled: boolean; triggers: unknown } }
    | { filter: GivenFilter },
): FilterTestResult {
  const reasons = liveness(webhook);
  let filters: Array<{ label: string; payload?: Record<string, unknown> | null }>;
  let selected: string;
  if ('automation' in target) {
    const a = target.automation;
    if (!a.enabled) reasons.push(`automation ${a.name} is disabled (enabled: false in ${a.path})`);
    const triggers = webhookTriggers(a.triggers).map((t, i) => ({ ...t, label: `triggers[${i}]` }));
    const onThis = triggers.filter((t) => t.webhookIds.includes(webhook.uid));
    if (onThis.length === 0) {
      const uids = [...new Set(triggers.flatMap((t) => t.webhookIds))];
      reasons.push(
        `automation ${a.name} has no trigger on this webhook (${webhook.uid}); its triggers select ${uids.join(', ') || 'no webhook'}`,
      );
    }
    // With no trigger on this webhook, still explain the payload against the ones it has.
    filters = onThis.length ? onThis : triggers;
    selected = `automation ${a.name} has a trigger on webhook ${webhook.name} (${webhook.uid})`;
    if (filters.length === 0) {
      return result(reasons, selected, {
        passed: false,
        message: `automation ${a.name} has no webhook trigger`,
        mismatches: [],
      });
    }
  } else {
    const ids = target.filter.webhook_ids;
    if (ids && !ids.includes(webhook.uid))
      reasons.push(`the filter selects ${ids.join(', ') || 'no webhook'}, not this webhook (${webhook.uid})`);
    else if (ids && ids.length !== 1)
      reasons.push(`a trigger selects exactly one webhook UID; this filter lists ${ids.length}`);
    filters = [{ label: 'the filter', payload: target.filter.payload }];
    selected = ids
      ? `the filter selects webhook ${webhook.name} (${webhook.uid})`
      : `the filter names no webhook_ids: tested as a trigger on webhook ${webhook.name} (${webhook.uid})`;
  }
  return result(reasons, selected, payloadCheck(filters, payload));
}

function liveness(webhook: TestedWebhook): string[] {
  if (webhook.deleted) return [`webhook ${webhook.name} was deleted: senders get 404`];
  if (!webhook.enabled) return [`webhook ${webhook.name} is disabled: senders get 404 until it is enabled`];
  return [];
}

/** The closest of the filters (any passing one, else the one with the fewest mismatches), explained. */
function payloadCheck(
  filters: Array<{ label: string; payload?: Record<string, unknown> | null }>,
  payload: unknown,
): FilterTestResult['payload_check'] {
  const explained = filters.map((f) => ({ ...f, ...explainPayloadFilter(f.payload, payload) }));
  const best =
    explained.find((e) => e.passed) ??
    [...explained].sort((a, b) => a.mismatches.length - b.mismatches.length)[0];
  const of = filters.length > 1 ? ` (${best.label}, the closest of ${filters.length} triggers)` : '';
  if (best.passed) {
    return {
      passed: true,
      message:
        best.payload === undefined || best.payload === null
          ? `${best.label} has no payload filter: every body passes`
          : `the payload matches the payload filter of ${best.label}`,
      mismatches: [],
    };
  }
  const n = best.mismatches.length;
  return {
    passed: false,
    message:
      n === 0
        ? `the payload is not a JSON object, and a payload filter matches only objects${of}`
        : `${n} condition${n === 1 ? '' : 's'} of the payload filter ${n === 1 ? 'fails' : 'fail'}: ${best.mismatches.map((m) => m.path).join(', ')}${of}`,
    mismatches: best.mismatches,
  };
}

function result(
  reasons: string[],
  selected: string,
  payload: FilterTestResult['payload_check'],
): FilterTestResult {
  const webhook_check = reasons.length
    ? { passed: false, message: reasons.join('; ') }
    : { passed: true, message: selected };
  return {
    result: webhook_check.passed && payload.passed ? 'would_trigger' : 'would_not_trigger',
    webhook_check,
    payload_check: payload,
  };
}
