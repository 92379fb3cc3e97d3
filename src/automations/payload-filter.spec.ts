import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compilePayloadFilter, explainPayloadFilter } from './payload-filter.js';

const scalar = fc.oneof(
  fc.string({ maxLength: 4 }),
  fc.integer({ min: -3, max: 3 }),
  fc.boolean(),
  fc.constant(null),
);
const key = fc.constantFrom('a', 'b', 'c', 'action', 'type');
const list = fc.array(scalar, { maxLength: 5 });
const match = (filter: Record<string, unknown> | undefined, body: unknown) =>
  compilePayloadFilter(filter)(body);

describe('payload filter (docs/factories.md)', () => {
  it('the examples from the contract', () => {
    const filter = {
      action: ['opened', 'reopened'],
      sender: { type: { not_in: ['Bot'] } },
      issue: { pull_request: { exists: false } },
    };
    expect(match(filter, { action: 'opened', sender: { type: 'User' }, issue: {} })).toBe(true);
    expect(match(filter, { action: 'closed', sender: { type: 'User' }, issue: {} })).toBe(false);
    expect(match(filter, { action: 'opened', sender: { type: 'Bot' }, issue: {} })).toBe(false);
    expect(match(filter, { action: 'opened', sender: { type: 'User' }, issue: { pull_request: null } })).toBe(
      false,
    );
    expect(match(filter, { action: 'opened' })).toBe(true); // sender.type missing passes not_in; pull_request absent
  });

  it('a bare array and {in} are the same; in and not_in are complements for a present scalar', () => {
    fc.assert(
      fc.property(key, list, scalar, (k, values, v) => {
        const body = { [k]: v };
        expect(match({ [k]: values }, body)).toBe(match({ [k]: { in: values } }, body));
        expect(match({ [k]: { in: values } }, body)).toBe(values.some((x) => x === v));
        expect(match({ [k]: { not_in: values } }, body)).toBe(!match({ [k]: { in: values } }, body));
      }),
    );
  });

  it('a missing field fails in, passes not_in and exists:false, fails exists:true', () => {
    fc.assert(
      fc.property(key, list, fc.dictionary(fc.constantFrom('x', 'y'), scalar), (k, values, body) => {
        expect(match({ [k]: { in: values } }, body)).toBe(false);
        expect(match({ [k]: { not_in: values } }, body)).toBe(true);
        expect(match({ [k]: { exists: false } }, body)).toBe(true);
        expect(match({ [k]: { exists: true } }, body)).toBe(false);
      }),
    );
  });

  it('null is present', () => {
    expect(match({ a: { exists: true } }, { a: null })).toBe(true);
    expect(match({ a: { exists: false } }, { a: null })).toBe(false);
    expect(match({ a: [null] }, { a: null })).toBe(true);
  });

  it('an array field matches in when any element is allowed, not_in when no element is excluded', () => {
    fc.assert(
      fc.property(list, fc.array(scalar, { maxLength: 5 }), (values, field) => {
        const body = { a: field };
        expect(match({ a: { in: values } }, body)).toBe(field.some((f) => values.includes(f)));
        expect(match({ a: { not_in: values } }, body)).toBe(!field.some((f) => values.includes(f)));
      }),
    );
  });

  it('compares by JSON type and value', () => {
    expect(match({ a: ['1'] }, { a: 1 })).toBe(false);
    expect(match({ a: [1] }, { a: '1' })).toBe(false);
    expect(match({ a: [true] }, { a: 'true' })).toBe(false);
    expect(match({ a: [null] }, { a: 'null' })).toBe(false);
    expect(match({ a: [1] }, { a: 1.0 })).toBe(true);
    expect(match({ a: { not_in: ['x'] } }, { a: { nested: 'x' } })).toBe(true);
    expect(match({ a: ['x'] }, { a: { nested: 'x' } })).toBe(false);
  });

  it('every key must match (AND)', () => {
    fc.assert(
      fc.property(list, list, fc.dictionary(key, scalar), (l1, l2, body) => {
        const both = match({ a: l1, b: { not_in: l2 } }, body);
        expect(both).toBe(match({ a: l1 }, body) && match({ b: { not_in: l2 } }, body));
      }),
    );
  });

  it('nested objects reach nested fields at any depth', () => {
    fc.assert(
      fc.property(fc.array(key, { minLength: 1, maxLength: 6 }), scalar, list, (path, v, values) => {
        const wrap = (inner: unknown) => path.reduceRight<unknown>((acc, k) => ({ [k]: acc }), inner);
        const body = wrap(v);
        const filter = wrap({ in: values }) as Record<string, unknown>;
        expect(match(filter, body)).toBe(values.some((x) => x === v));
      }),
    );
  });

  it('a body that is not an object matches only a trigger with no payload filter', () => {
    fc.assert(
      fc.property(fc.oneof(scalar, fc.array(scalar)), fc.dictionary(key, list), (body, filter) => {
        expect(match(undefined, body)).toBe(true);
        expect(match(filter, body)).toBe(false);
      }),
    );
  });

  it('explain passes exactly when the compiled filter matches, for any filter and body', () => {
    const { filter, body } = fc.letrec((tie) => ({
      condition: fc.oneof(
        { depthSize: 'small', withCrossShrink: true },
        list,
        scalar,
        fc.record({ in: list }),
        fc.record({ not_in: list }),
        fc.record({ exists: fc.boolean() }),
        fc.record({ in: list, not_in: list }, { requiredKeys: [] }),
        tie('filter'),
      ),
      filter: fc.dictionary(key, tie('condition'), { maxKeys: 3 }),
      body: fc.oneof(
        { depthSize: 'small' },
        scalar,
        fc.array(scalar, { maxLength: 3 }),
        fc.dictionary(key, tie('body'), { maxKeys: 4 }),
      ),
    }));
    fc.assert(
      fc.property(fc.option(filter, { nil: undefined }), body, (f, b) => {
        const explained = explainPayloadFilter(f as Record<string, unknown> | undefined, b);
        expect(explained.passed).toBe(match(f as Record<string, unknown> | undefined, b));
        expect(explained.passed).toBe(explained.mismatches.length === 0 && (f === undefined || isObject(b)));
      }),
      { numRuns: 2000 },
    );
  });

  it('explain names each failing field by its dotted path, with expected and actual values', () => {
    const filter = {
      action: ['opened', 'reopened'],
      sender: { type: { not_in: ['Bot'] } },
      issue: { pull_request: { exists: false }, number: { in: [1, 2] } },
      label: { exists: true },
    };
    const body = { action: 'closed', sender: { type: 'Bot' }, issue: { pull_request: null } };
    expect(explainPayloadFilter(filter, body)).toEqual({
      passed: false,
      mismatches: [
        {
          path: 'action',
          condition: 'in',
          expected: ['opened', 'reopened'],
          actual: 'closed',
          present: true,
        },
        { path: 'sender.type', condition: 'not_in', expected: ['Bot'], actual: 'Bot', present: true },
        { path: 'issue.pull_request', condition: 'exists', expected: false, actual: null, present: true },
        { path: 'issue.number', condition: 'in', expected: [1, 2], present: false },
        { path: 'label', condition: 'exists', expected: true, present: false },
      ],
      paths: ['action', 'sender.type', 'issue.pull_request', 'issue.number', 'label'],
    });
    expect(explainPayloadFilter(filter, 'not an object')).toMatchObject({ passed: false, mismatches: [] });
    expect(explainPayloadFilter(undefined, 'anything')).toEqual({ passed: true, mismatches: [], paths: [] });
  });
});

function isObject(v: unknown): boolean {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
