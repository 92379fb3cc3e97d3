/**
 * Payload filters (docs/factories.md), compiled once per apply into a predicate over a parsed body, and
 * explained (Test filter) by the same parsed conditions and the same field tests.
 *
 * - Every key must match (AND). A bare array or `{in: [...]}` matches when the field equals one value;
 *   `{not_in: [...]}` when it equals none; `{exists: true|false}` tests presence (null is present).
 * - A missing field fails `in`, passes `not_in`, passes `exists: false`.
 * - An array-valued field matches `in` when any element is allowed, `not_in` when no element is excluded.
 * - Values compare as JSON scalars, by type and value (`"1"` ≠ `1`).
 * - Any other object reaches into a nested field; a bare scalar means `{in: [scalar]}`.
 * - A body that is not an object matches only a trigger without a payload filter.
 * Pure: no I/O. The limits (depth, size) are checked when the definition applies.
 */
export type PayloadPredicate = (body: unknown) => boolean;

type Scalar = string | number | boolean | null;
/** Tests one field: `present` is false when the key is absent. */
type FieldTest = (value: unknown, present: boolean) => boolean;

export type Operator = 'in' | 'not_in' | 'exists';

/** One operator on one field, e.g. `{not_in: [Bot]}`. */
interface OperatorCondition {
  operator: Operator;
  expected: Scalar[] | boolean;
  test: FieldTest;
}

/** A parsed filter: nested fields (AND), or the operators (AND) that test one field. */
type Condition =
  | { kind: 'fields'; fields: Array<{ key: string; condition: Condition }> }
  | { kind: 'operators'; operators: OperatorCondition[] };

/** Why a field failed its condition: what Test filter shows a person. */
export interface Mismatch {
  /** Dotted path of the field, e.g. `sender.type`. */
  path: string;
  condition: Operator;
  expected: Scalar[] | boolean;
  /** Absent when the field is missing. */
  actual?: unknown;
  present: boolean;
}

const OPERATORS = new Set<string>(['in', 'not_in', 'exists']);

export function compilePayloadFilter(filter: Record<string, unknown> | undefined | null): PayloadPredicate {
  if (filter === undefined || filter === null) return () => true;
  const test = compile(parseFields(filter));
  return (body) => isObject(body) && test(body, true);
}

/**
 * Which conditions `body` fails, one entry per failing operator; `passed` is exactly what the compiled
 * predicate answers. A body that is not an object fails a filter without any field mismatch.
 */
export function explainPayloadFilter(
  filter: Record<string, unknown> | undefined | null,
  body: unknown,
): { passed: boolean; mismatches: Mismatch[]; paths: string[] } {
  if (filter === undefined || filter === null) return { passed: true, mismatches: [], paths: [] };
  const parsed = parseFields(filter);
  const paths = conditionPaths(parsed, []);
  if (!isObject(body)) return { passed: false, mismatches: [], paths };
  const mismatches: Mismatch[] = [];
  explain(parsed, body, true, [], mismatches);
  return { passed: mismatches.length === 0, mismatches, paths };
}

/** The dotted path of every field the filter tests, in its order (a mismatch names one of these). */
function conditionPaths(condition: Condition, path: string[]): string[] {
  if (condition.kind === 'operators') return [path.join('.')];
  return condition.fields.flatMap(({ key, condition: c }) => conditionPaths(c, [...path, key]));
}

function parseFields(filter: Record<string, unknown>): Condition {
  return {
    kind: 'fields',
    fields: Object.entries(filter).map(([key, condition]) => ({ key, condition: parse(condition) })),
  };
}

function parse(condition: unknown): Condition {
  if (Array.isArray(condition)) return operators({ in: condition });
  if (isObject(condition)) {
    const keys = Object.keys(condition);
    if (keys.length > 0 && keys.every((k) => OPERATORS.has(k))) return operators(condition);
    return parseFields(condition);
  }
  return operators({ in: [condition] });
}

function operators(condition: Record<string, unknown>): Condition {
  const out: OperatorCondition[] = [];
  if (Array.isArray(condition.in))
    out.push({ operator: 'in', expected: condition.in as Scalar[], test: isIn(condition.in as Scalar[]) });
  if (Array.isArray(condition.not_in))
    out.push({
      operator: 'not_in',
      expected: condition.not_in as Scalar[],
      test: notIn(condition.not_in as Scalar[]),
    });
  if (typeof condition.exists === 'boolean') {
    const want = condition.exists;
    out.push({ operator: 'exists', expected: want, test: (_, present) => present === want });
  }
  return { kind: 'operators', operators: out };
}

/** A nested field of `value`: missing when `value` is no object or lacks the key. */
function field(value: unknown, key: string): { value: unknown; present: boolean } {
  return isObject(value) && Object.hasOwn(value, key)
    ? { value: value[key], present: true }
    : { value: undefined, present: false };
}

function compile(condition: Condition): FieldTest {
  if (condition.kind === 'operators') {
    const { operators: ops } = condition;
    return (value, present) => ops.every((o) => o.test(value, present));
  }
  const fields = condition.fields.map(({ key, condition: c }) => ({ key, test: compile(c) }));
  return (value) =>
    fields.every(({ key, test }) => {
      const f = field(value, key);
      return test(f.value, f.present);
    });
}

function explain(condition: Condition, value: unknown, present: boolean, path: string[], out: Mismatch[]) {
  if (condition.kind === 'operators') {
    for (const o of condition.operators) {
      if (o.test(value, present)) continue;
      out.push({
        path: path.join('.'),
        condition: o.operator,
        expected: o.expected,
        ...(present ? { actual: value } : {}),
        present,
      });
    }
    return;
  }
  for (const { key, condition: c } of condition.fields) {
    const f = field(value, key);
    explain(c, f.value, f.present, [...path, key], out);
  }
}

function isIn(allowed: Scalar[]): FieldTest {
  const has = membership(allowed);
  return (value, present) => present && (Array.isArray(value) ? value.some(has) : has(value));
}

function notIn(excluded: Scalar[]): FieldTest {
  const has = membership(excluded);
  return (value, present) => !present || (Array.isArray(value) ? !value.some(has) : !has(value));
}

/** Membership by JSON type and value; objects and arrays equal no scalar. */
function membership(values: Scalar[]): (v: unknown) => boolean {
  const set = new Set(values);
  return (v) =>
    (v === null || typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') && set.has(v);
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
