import { describe, expect, it } from 'vitest';
import { storableText, storableValue, TOO_DEEP, unstorableText } from './storable.js';

describe('storableText', () => {
  it('replaces NUL and unpaired surrogates by U+FFFD, and keeps pairs and other text', () => {
    expect(storableText('a\u0000b')).toBe('a\ufffdb');
    expect(storableText('\ud800x\udc00')).toBe('\ufffdx\ufffd');
    expect(storableText('end\ud83d')).toBe('end\ufffd');
    expect(storableText('ok 😀 é \t')).toBe('ok 😀 é \t');
    for (const s of ['\u0000\u0000', '\udfff\ud800', 'x\ud83d\ude00\ud83d'])
      expect(unstorableText(storableText(s))).toBeUndefined();
  });
});

describe('storableValue', () => {
  it('makes every string and key storable, without changing the value it was given', () => {
    const given = { 'k\u0000': ['v\ud800', { deep: 'x\u0000' }], n: 1, b: true, z: null };
    const stored = storableValue(given) as Record<string, unknown>;
    expect(JSON.parse(JSON.stringify(stored))).toEqual({
      'k\ufffd': ['v\ufffd', { deep: 'x\ufffd' }],
      n: 1,
      b: true,
      z: null,
    });
    expect(given['k\u0000'][0]).toBe('v\ud800');
  });

  it('keeps a __proto__ key a key', () => {
    const stored = storableValue(JSON.parse('{"__proto__":{"polluted":true}}')) as Record<string, unknown>;
    expect(JSON.stringify(stored)).toBe('{"__proto__":{"polluted":true}}');
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('replaces what lies deeper than the limit, however deep (no recursion)', () => {
    const deep = JSON.parse('['.repeat(200_000) + ']'.repeat(200_000));
    const stored = storableValue(deep, 3);
    expect(stored).toEqual([[[TOO_DEEP]]]);
  });
});
