import { describe, expect, it } from 'vitest';
import { DEFINITION_LIMITS } from './definition.js';
import { SourceFile } from './source-file.js';

/** The limits every YAML parse of a definition file holds to: errors with a line, never a throw. */
describe('SourceFile: YAML as data, within limits', () => {
  it('any tag after the opening `---` is refused at line 1, before an engine is chosen', () => {
    for (const tag of ['js', 'javascript', 'json', 'yaml', 'coffee', ' toString']) {
      const f = SourceFile.markdown('agents/a/agent.md', `---${tag}\n{}\n---\nbody\n`);
      expect(f.data).toBeUndefined();
      expect(f.errors).toEqual([
        {
          path: 'agents/a/agent.md',
          line: 1,
          message: `front matter must open with a bare \`---\` line; \`---${tag.trim()}\` would name an engine and only YAML is read`,
        },
      ]);
    }
    // Trailing spaces are still a bare opening.
    expect(SourceFile.markdown('a.md', '---  \ndescription: x\n---\nbody').data).toEqual({
      description: 'x',
    });
  });

  it('a byte-order mark before the opening changes nothing: a tag is still refused, a bare `---` still read', () => {
    // Issue #32, 8: `\uFEFF---constructor` got past the tag check (the mark hid it) and gray-matter,
    // which drops the mark itself, then silently dropped the front matter.
    for (const tag of ['constructor', 'toString', 'js', '__proto__']) {
      const f = SourceFile.markdown('agents/a/agent.md', `\uFEFF---${tag}\ndescription: x\n---\nbody\n`);
      expect(f.data).toBeUndefined();
      expect(f.errors[0]).toMatchObject({
        line: 1,
        message: expect.stringContaining(`\`---${tag}\` would name an engine`),
      });
    }
    const bare = SourceFile.markdown('agents/a/agent.md', '\uFEFF---\ndescription: x\n---\nbody\n');
    expect(bare.errors).toEqual([]);
    expect(bare.data).toEqual({ description: 'x' });
  });

  it('nesting deeper than the limit is an error at the line of the too-deep collection', () => {
    const depth = DEFINITION_LIMITS.yamlDepth + 1;
    const text = Array.from({ length: depth }, (_, i) => `${'  '.repeat(i)}k${i}:`).join('\n') + ' x\n';
    const f = SourceFile.yaml('webhooks/w.yaml', text);
    expect(f.errors).toEqual([
      {
        path: 'webhooks/w.yaml',
        line: depth,
        message: 'not valid YAML: it nests more than 32 levels deep',
      },
    ]);
    // A flow collection nested 10,000 deep is an error too, not a crash.
    expect(
      SourceFile.yaml('webhooks/w.yaml', `a: ${'['.repeat(10_000)}${']'.repeat(10_000)}`).errors,
    ).not.toEqual([]);
  });

  it('more nodes than the limit, or more YAML bytes, are errors', () => {
    const many = `x: [${Array.from({ length: DEFINITION_LIMITS.yamlNodes }, () => '1').join(', ')}]\n`;
    expect(SourceFile.yaml('factory.yaml', many).errors[0].message).toBe(
      'not valid YAML: it holds more than 2000 values (keys, scalars, lists, maps)',
    );
    const big = SourceFile.markdown('agents/a/agent.md', `---\ndescription: ${'x'.repeat(17_000)}\n---\n`);
    expect(big.errors[0]).toMatchObject({
      line: 1,
      message: expect.stringMatching(/of YAML; the limit is 16\.0 KiB/),
    });
  });

  it('a repeated key is an error at its second line (checked in linear time)', () => {
    const f = SourceFile.yaml('factory.yaml', 'name: a\ndescription: b\nname: c\n');
    expect(f.errors).toEqual([
      { path: 'factory.yaml', line: 3, message: 'not valid YAML: the key "name" appears twice' },
    ]);
  });
});
