import { explainHeaderFilter, type HeaderOutcome } from '../automations/header-filter.js';
import { explainPayloadFilter, type Mismatch } from '../automations/payload-filter.js';
import { webhookTriggers, type WebhookTriggerFilter } from '../automations/trigger-index.js';
import { RequestInvalid } from '../common/problem.js';
import { SourceFile } from '../definitions/source-file.js';

export interface Check {
  passed: boolean;
  message: string;
}

export interface FilterTestResult {
  result: 'would_trigger' | 'would_not_trigger';
  webhook_check: Check;
  /** `paths`: every field the payload filter tests, passed or not; `mismatches`: the failing ones. */
  payload_check: Check & { mismatches: Mismatch[]; paths: string[] };
  /** Each header path of the header filter, passed or not (empty without a header filter). */
  header_check: Check & { headers: HeaderOutcome[] };
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
  headers?: Record<string, unknown>;
}

/** A stored delivery as Test filter judges it: its parsed body and its stored headers. */
export interface TestedDelivery {
  payload: unknown;
  headers: Readonly<Record<string, string>>;
}

type LabelledFilter = Pick<WebhookTriggerFilter, 'payload' | 'headers'> & { label: string };

/**
 * Test filter: would a delivery of `payload` to `webhook` start a run of `automation` (its enabled
 * state and triggers), or pass `filter`? The webhook check says whether the trigger selects this
 * webhook (and that the webhook and automation are live); the payload check explains the payload
 * filter, and the header check each header path of the header filter, with the same semantics the
 * ingress applies (explainPayloadFilter, explainHeaderFilter).
 */
export function testFilter(
  webhook: TestedWebhook,
  delivery: TestedDelivery,
  target:
    | { automation: { name: string; path: string; enabled: boolean; triggers: unknown } }
    | { filter: GivenFilter },
): FilterTestResult {
  const reasons = liveness(webhook);
  let filters: LabelledFilter[];
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
        payload_check: {
          passed: false,
          message: `automation ${a.name} has no webhook trigger`,
          mismatches: [],
          paths: [],
        },
        header_check: { passed: false, message: `automation ${a.name} has no webhook trigger`, headers: [] },
      });
    }
  } else {
    const ids = target.filter.webhook_ids;
    if (ids && !ids.includes(webhook.uid))
      reasons.push(`the filter selects ${ids.join(', ') || 'no webhook'}, not this webhook (${webhook.uid})`);
    else if (ids && ids.length !== 1)
      reasons.push(`a trigger selects exactly one webhook UID; this filter lists ${ids.length}`);
    filters = [{ label: 'the filter', payload: target.filter.payload, headers: target.filter.headers }];
    selected = ids
      ? `the filter selects webhook ${webhook.name} (${webhook.uid})`
      : `the filter names no webhook_ids: tested as a trigger on webhook ${webhook.name} (${webhook.uid})`;
  }
  return result(reasons, selected, filterChecks(filters, delivery));
}

function liveness(webhook: TestedWebhook): string[] {
  if (webhook.deleted) return [`webhook ${webhook.name} was deleted: senders get 404`];
  if (!webhook.enabled) return [`webhook ${webhook.name} is disabled: senders get 404 until it is enabled`];
  return [];
}

/**
 * The closest of the filters (any passing one, else the one with the fewest failing conditions,
 * payload and headers together), explained.
 */
function filterChecks(
  filters: LabelledFilter[],
  delivery: TestedDelivery,
): Pick<FilterTestResult, 'payload_check' | 'header_check'> {
  const explained = filters.map((f) => {
    const payload = explainPayloadFilter(f.payload, delivery.payload);
    const headers = explainHeaderFilter(f.headers, delivery.headers);
    const failing =
      payload.mismatches.length + (payload.passed ? 0 : 1) + headers.outcomes.filter((o) => !o.passed).length;
    return { filter: f, payload, headers, failing, passed: payload.passed && headers.passed };
  });
  const best = explained.find((e) => e.passed) ?? [...explained].sort((a, b) => a.failing - b.failing)[0];
  const of = filters.length > 1 ? ` (${best.filter.label}, the closest of ${filters.length} triggers)` : '';
  return {
    payload_check: payloadCheck(best.filter, best.payload, best.passed ? '' : of),
    header_check: headerCheck(best.filter, best.headers, best.passed ? '' : of),
  };
}

function payloadCheck(
  filter: LabelledFilter,
  explained: { passed: boolean; mismatches: Mismatch[]; paths: string[] },
  of: string,
): FilterTestResult['payload_check'] {
  if (explained.passed) {
    return {
      passed: true,
      message:
        filter.payload === undefined || filter.payload === null
          ? `${filter.label} has no payload filter: every body passes`
          : `the payload matches the payload filter of ${filter.label}`,
      mismatches: [],
      paths: explained.paths,
    };
  }
  const n = explained.mismatches.length;
  return {
    passed: false,
    message:
      n === 0
        ? `the payload is not a JSON object, and a payload filter matches only objects${of}`
        : `${n} condition${n === 1 ? '' : 's'} of the payload filter ${n === 1 ? 'fails' : 'fail'}: ${explained.mismatches.map((m) => m.path).join(', ')}${of}`,
    mismatches: explained.mismatches,
    paths: explained.paths,
  };
}

function headerCheck(
  filter: LabelledFilter,
  explained: { passed: boolean; outcomes: HeaderOutcome[] },
  of: string,
): FilterTestResult['header_check'] {
  if (filter.headers === undefined || filter.headers === null)
    return {
      passed: true,
      message: `${filter.label} has no header filter: every delivery passes`,
      headers: [],
    };
  const failed = explained.outcomes.filter((o) => !o.passed).map((o) => o.path);
  return {
    passed: explained.passed,
    message: explained.passed
      ? `the headers match the header filter of ${filter.label}: ${explained.outcomes.map((o) => o.path).join(', ')}`
      : `${failed.length} header${failed.length === 1 ? '' : 's'} of the header filter ${failed.length === 1 ? 'fails' : 'fail'}: ${failed.join(', ')}${of}`,
    headers: explained.outcomes,
  };
}

function result(
  reasons: string[],
  selected: string,
  checks: Pick<FilterTestResult, 'payload_check' | 'header_check'>,
): FilterTestResult {
  const webhook_check = reasons.length
    ? { passed: false, message: reasons.join('; ') }
    : { passed: true, message: selected };
  return {
    result:
      webhook_check.passed && checks.payload_check.passed && checks.header_check.passed
        ? 'would_trigger'
        : 'would_not_trigger',
    webhook_check,
    ...checks,
  };
}

/**
 * A filter given as text (what an automation file's `filter:` holds), read as definition files are:
 * the same YAML rules and limits, a syntax error named by its line. Its shape is checked after.
 */
export function filterFromText(text: string): unknown {
  const file = SourceFile.yaml('filter', text);
  if (file.errors.length)
    throw new RequestInvalid(
      file.errors.map((e) => ({ path: 'filter', message: `filter, line ${e.line}: ${e.message}` })),
    );
  const data = file.data;
  if (typeof data !== 'object' || data === null || Array.isArray(data))
    throw new RequestInvalid([
      {
        path: 'filter',
        message:
          'filter: the text is a map of webhook_ids, payload and headers (what an automation trigger’s filter: holds), e.g. "payload: {action: [opened]}"',
      },
    ]);
  return data;
}
