import { LineCounter, parseDocument } from 'yaml';
import { describe, expect, it } from 'vitest';
import { yamlSyntaxError } from './yaml-syntax.js';

/** The first error the parser reports in `text`, as a person is told it. */
function told(text: string): { line: number; message: string } {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: false, uniqueKeys: false });
  expect(doc.errors.length).toBeGreaterThan(0);
  return yamlSyntaxError(doc.errors[0], text, lines);
}

describe('a YAML syntax error in words, at the line to change (issue #30, 3)', () => {
  it('an over-indented key: the line itself, not the parser’s lines around it', () => {
    // The example factory with line 7 indented under the list above it: the parser complains at
    // lines 6, 7, 9 and 10 ("Implicit keys need to be on a single line", "All mapping items …").
    const text = [
      '# yaml-language-server: $schema=../../schemas/editor/factory.schema.json',
      'schemaVersion: v1alpha1',
      'name: example',
      'description: Triage GitHub issues.',
      'repositories:',
      '  - acme/web',
      '    agentDefaults:',
      '  model: claude-sonnet-4',
      '  workerHost: warp',
    ].join('\n');
    expect(told(text)).toEqual({
      line: 7,
      message:
        'this line is indented 4 spaces, deeper than line 6 above it (2), which already has its value: YAML reads this line as more of that value. Indent it like the keys it belongs with',
    });
    expect(told('name: x\n  description: y\n').line).toBe(2);
    expect(told('triggers:\n  - provider: webhook\n     event: received\n')).toMatchObject({
      line: 3,
      message: expect.stringMatching(/^this line is indented 5 spaces, deeper than line 2 above it \(4\)/),
    });
  });

  it('an under-indented key names the indentations it could have', () => {
    expect(told('name: x\nagentDefaults:\n  model: m\n workerHost: warp\n')).toEqual({
      line: 4,
      message:
        'this line is indented 1 space, where the lines above it are at 2 (line 3) or 0 (line 2): indent it like the keys it belongs with',
    });
    expect(told('triggers:\n  - provider: webhook\n   event: received\n').message).toBe(
      'this line is indented 3 spaces, where the lines above it are at 4 (line 2) or 0 (line 1): indent it like the keys it belongs with',
    );
  });

  it('a tab, an unclosed quote or bracket, a colon in a value, a missing space: each said as such', () => {
    expect(told('name: x\nagentDefaults:\n\tmodel: m\n')).toEqual({
      line: 3,
      message: 'this line is indented with a tab, and YAML indents with spaces only',
    });
    expect(told('name: "x\ndescription: y\n')).toEqual({
      line: 1,
      message: 'the quoted value that starts on this line never ends: add its closing "',
    });
    expect(told('name: x\nrepositories: [a, b\ndescription: y\n')).toEqual({
      line: 2,
      message: 'the "[" on this line is never closed: add its "]"',
    });
    expect(told('{"payload": {"action": ["opened"]}\n')).toEqual({
      line: 1,
      message: 'the "{" on this line is never closed: add its "}"',
    });
    expect(told('name: x\ndescription: fixes: builds\n')).toEqual({
      line: 2,
      message:
        'the value of description holds ": ", which YAML reads as the start of another key: put the value in quotes (description: "fixes: builds")',
    });
    expect(told('name:x\ndescription: y\n')).toEqual({
      line: 1,
      message: '"name:x" is read as text, not as a key and its value: put a space after the colon (name: x)',
    });
    expect(told('a:\n  b: 1\n  - c\n')).toEqual({
      line: 3,
      message:
        'a list item ("- c") among the keys of a map: indent it under the key whose list it is, or give it a key',
    });
    expect(told('{"a": 1 "b": 2}\n').message).toMatch(
      /^inside \[ \] or \{ \}, entries are separated by commas/,
    );
    expect(told('a: @x\n').message).toBe(
      'a value cannot start with "@" unless it is quoted: put the value in quotes',
    );
  });
});
