/**
 * Payload filters (CONTRACT.md §3), compiled once per apply into a predicate over a parsed body.
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

const OPERATORS = new Set(['in', 'not_in', 'exists']);

export function compilePayloadFilter(filter: Record<string, unknown> | undefined | null): PayloadPredicate {
  if (filter === undefined || filter === null) return () => true;
  const test = compileObject(filter);
  return (body) => isObject(body) && test(body, true);
}

function compileObject(filter: Record<string, unknown>): FieldTest {
  const fields = Object.entries(filter).map(([key, condition]) => ({
    key,
    test: compileCondition(condition),
  }));
  return (value) => {
    const obj = isObject(value) ? value : undefined;
    return fields.every(({ key, test }) =>
      obj !== undefined && Object.hasOwn(obj, key) ? test(obj[key], true) : test(undefined, false),
    );
  };
}

function compileCondition(condition: unknown): FieldTest {
  if (Array.isArray(condition)) return isIn(condition as Scalar[]);
  if (isObject(condition)) {
    const keys = Object.keys(condition);
    if (keys.length > 0 && keys.every((k) => OPERATORS.has(k))) {
      const tests: FieldTest[] = [];
      if (Array.isArray(condition.in)) tests.push(isIn(condition.in as Scalar[]));
      if (Array.isArray(condition.not_in)) tests.push(notIn(condition.not_in as Scalar[]));
      if (typeof condition.exists === 'boolean') {
        const want = condition.exists;
        tests.push((_, present) => present === want);
      }
      return (value, present) => tests.every((t) => t(value, present));
    }
    return compileObject(condition);
  }
  return isIn([condition as Scalar]);
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
