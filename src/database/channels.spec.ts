import { describe, expect, expectTypeOf, it } from 'vitest';
import { CHANNELS, type Channel, type RunControl } from './channels.js';

describe('CHANNELS', () => {
  it('each has its own plain PostgreSQL name (LISTEN takes it unquoted)', () => {
    const names = Object.values(CHANNELS).map((c) => c.name);
    expect(new Set(names).size).toBe(names.length);
    for (const name of names) expect(name).toMatch(/^factoryd_[a-z_]+$/);
  });

  it('carry their payload type: what is encoded decodes to the same value', () => {
    expectTypeOf(CHANNELS.definitionsApplied).toEqualTypeOf<Channel<string>>();
    expectTypeOf(CHANNELS.runsQueued).toEqualTypeOf<Channel<void>>();
    expectTypeOf(CHANNELS.runControl).toEqualTypeOf<Channel<RunControl>>();
    const id = '0b6c1f2e-6f1e-4a51-9d5c-1f6f2a3b4c5d';
    expect(CHANNELS.definitionsApplied.decode(CHANNELS.definitionsApplied.encode(id))).toBe(id);
    expect(CHANNELS.runsQueued.encode(undefined)).toBe('');
    const control: RunControl = { run_id: 'r1', kind: 'cancel' };
    expect(CHANNELS.runControl.decode(CHANNELS.runControl.encode(control))).toEqual(control);
  });

  it('keep the wire format other replicas (and older versions) send', () => {
    const id = '7d4f0c0e-2b7a-4c8e-9a51-3c2d1e0f9a8b';
    expect(CHANNELS.definitionsApplied.decode(id)).toBe(id);
    expect(CHANNELS.runControl.decode('{"run_id":"r2","kind":"followup"}')).toEqual({
      run_id: 'r2',
      kind: 'followup',
    });
  });

  it('refuse a payload that is not theirs', () => {
    for (const bad of ['', 'f-1', "1'; DROP TABLE factories"])
      expect(() => CHANNELS.definitionsApplied.decode(bad), bad).toThrow();
    for (const bad of [
      '',
      'not json',
      '[]',
      'null',
      '{"run_id":1,"kind":"cancel"}',
      '{"run_id":"r","kind":"stop"}',
    ])
      expect(() => CHANNELS.runControl.decode(bad), bad).toThrow();
  });

  it('a payload of the wrong type does not compile', () => {
    // @ts-expect-error a factory id is a string
    CHANNELS.definitionsApplied.encode(42);
    // @ts-expect-error a run control names its kind
    CHANNELS.runControl.encode({ run_id: 'r' });
    // @ts-expect-error kinds are followup and cancel
    CHANNELS.runControl.encode({ run_id: 'r', kind: 'pause' });
  });
});
