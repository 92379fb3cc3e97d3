import { describe, expect, it } from 'vitest';
import { encodeInput, parseHarnessLine } from './harness-protocol.js';

describe('usage reports', () => {
  it('a well-formed report is a usage event, with the cache counts it gives', () => {
    expect(
      parseHarnessLine(
        '{"type":"usage","model_id":"claude-sonnet-4-5","input_tokens":12,"output_tokens":3,"cache_read_tokens":40}',
      ),
    ).toEqual({
      type: 'usage',
      model_id: 'claude-sonnet-4-5',
      input_tokens: 12,
      output_tokens: 3,
      cache_read_tokens: 40,
    });
  });

  it.each([
    ['no model', '{"type":"usage","input_tokens":1,"output_tokens":1}'],
    ['a model id with a space', '{"type":"usage","model_id":"a b","input_tokens":1,"output_tokens":1}'],
    ['a negative count', '{"type":"usage","model_id":"m","input_tokens":-1,"output_tokens":1}'],
    ['a fraction', '{"type":"usage","model_id":"m","input_tokens":1.5,"output_tokens":1}'],
    ['a count as text', '{"type":"usage","model_id":"m","input_tokens":"1","output_tokens":1}'],
    ['an absurd count', `{"type":"usage","model_id":"m","input_tokens":${2 ** 41},"output_tokens":1}`],
    [
      'a bad cache count',
      '{"type":"usage","model_id":"m","input_tokens":1,"output_tokens":1,"cache_write_tokens":null}',
    ],
  ])('%s is kept as a transcript line, never summed', (_, line) => {
    expect(parseHarnessLine(line)).toEqual({ type: 'transcript', stream: 'stdout', text: line });
  });
});

describe('interrupt', () => {
  it('is one line on stdin', () => {
    expect(encodeInput({ type: 'interrupt' })).toBe('{"type":"interrupt"}\n');
  });
});
