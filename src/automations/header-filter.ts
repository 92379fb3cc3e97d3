/**
 * Header filters: a webhook trigger's `filter.headers`, with the operators of the payload filter
 * (payload-filter.ts) over the delivery's stored headers. Header names are case-insensitive (they
 * are lower-cased here, as Node hands them over); values are strings. Credentials are never
 * matchable: a definition naming one is refused, and the ingress never stores one.
 * Pure: no I/O.
 */
import { compilePayloadFilter, explainPayloadFilter, type Mismatch } from './payload-filter.js';

export type HeaderPredicate = (headers: Readonly<Record<string, string>>) => boolean;

/** The filter with its header names lower-cased (the later of two spellings of one name wins). */
function normalized(filter: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(filter).map(([name, c]) => [name.toLowerCase(), c]));
}

/** The (lower-case) header names a filter reads. */
export function headerNames(filter: Record<string, unknown> | undefined | null): string[] {
  return filter ? Object.keys(normalized(filter)) : [];
}

export function compileHeaderFilter(filter: Record<string, unknown> | undefined | null): HeaderPredicate {
  if (filter === undefined || filter === null) return () => true;
  const test = compilePayloadFilter(normalized(filter));
  return (headers) => test(headers);
}

/** One header condition's outcome, for Test filter: passed, or the mismatches that failed it. */
export interface HeaderOutcome {
  /** The lower-case header name, e.g. `x-github-event`. */
  path: string;
  passed: boolean;
  /** Absent when the delivery has no stored header of this name. */
  actual?: string;
  mismatches: Mismatch[];
}

/** Each header condition explained on its own, with exactly the semantics of compileHeaderFilter. */
export function explainHeaderFilter(
  filter: Record<string, unknown> | undefined | null,
  headers: Readonly<Record<string, string>>,
): { passed: boolean; outcomes: HeaderOutcome[] } {
  const outcomes = Object.entries(filter ? normalized(filter) : {}).map(([path, condition]) => {
    const { passed, mismatches } = explainPayloadFilter({ [path]: condition }, headers);
    return {
      path,
      passed,
      ...(Object.hasOwn(headers, path) ? { actual: headers[path] } : {}),
      mismatches,
    };
  });
  return { passed: outcomes.every((o) => o.passed), outcomes };
}
