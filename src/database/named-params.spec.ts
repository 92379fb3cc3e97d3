import { describe, expect, it } from 'vitest';
import { namedParams } from './named-params.js';

describe('namedParams', () => {
  it('numbers the names in order and lays out their values in the same order', () => {
    const p = namedParams(['host', 'max', 'now']);
    expect(p.$).toEqual({ host: '$1', max: '$2', now: '$3' });
    const now = new Date(0);
    expect(p.values({ now, host: 'h', max: 2 })).toEqual(['h', 2, now]);
  });
});
