import { describe, expect, it } from 'vitest';
import { humanDuration, isoDuration } from './durations.js';

describe('run times', () => {
  it('on the wire as ISO 8601 durations', () => {
    expect([0, 638, 57_638, 65_250, 3_723_000].map(isoDuration)).toEqual([
      'PT0S',
      'PT0.638S',
      'PT57.638S',
      'PT1M5.25S',
      'PT1H2M3S',
    ]);
  });

  it('for people: seconds (a tenth below ten), minutes and seconds, hours and minutes, days (issue #30, 7)', () => {
    expect(
      ['PT0S', 'PT0.638S', 'PT9.96S', 'PT57.638S', 'PT1M5.25S', 'PT2M', 'PT1H2M3S', 'PT5H', 'P1DT3H4M'].map(
        humanDuration,
      ),
    ).toEqual(['0 s', '0.6 s', '10 s', '58 s', '1 min 5 s', '2 min', '1 h 2 min', '5 h', '1 d 3 h']);
    // What the API writes reads back as the same time.
    for (const ms of [0, 4_200, 59_999, 61_000, 7_260_000])
      expect(humanDuration(isoDuration(ms))).not.toMatch(/^P/);
    // Rounding never shows a unit's limit: 59.6 s is a minute, not "60 s".
    expect(['PT59.4S', 'PT59.6S', 'PT59M59.6S'].map(humanDuration)).toEqual(['59 s', '1 min', '1 h']);
    expect(humanDuration('soon')).toBe('soon');
    expect(humanDuration('PT')).toBe('PT');
  });
});
