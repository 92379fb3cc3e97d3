import type { LineCounter, YAMLError } from 'yaml';

/**
 * A YAML syntax error said in words, at the line a person has to change. The parser reports where it
 * noticed (often the line before or after the mistake) in its own terms, and then every line it could
 * not place after it; only its first error is told here, since the others follow from it.
 */
export function yamlSyntaxError(
  error: YAMLError,
  text: string,
  lines: LineCounter,
): { line: number; message: string } {
  const source = text.split('\n');
  const start = lines.linePos(error.pos[0]).line;
  const end = lines.linePos(error.pos[1]).line;
  const said = error.message.split('\n')[0];
  const at = (line: number, message: string) => ({ line, message });

  if (error.code === 'TAB_AS_INDENT')
    return at(start, 'this line is indented with a tab, and YAML indents with spaces only');
  const flow = /^Flow (sequence|map)\b.*end with an? ([\]}])/.exec(said);
  if (flow) {
    const open = flow[2] === ']' ? '[' : '{';
    return at(
      lineOfLast(text, open, error.pos[0], lines) ?? start,
      `the "${open}" on this line is never closed: add its "${flow[2]}"`,
    );
  }
  const quote = /^Missing closing (["'])quote/.exec(said);
  if (quote)
    return at(
      lineOfLast(text, quote[1], error.pos[0], lines) ?? start,
      `the quoted value that starts on this line never ends: add its closing ${quote[1]}`,
    );
  if (['MULTILINE_IMPLICIT_KEY', 'BLOCK_AS_IMPLICIT_KEY', 'BAD_INDENT'].includes(error.code)) {
    const deeper = overIndented(source, start, Math.max(end, start + 1));
    if (deeper)
      return at(
        deeper.line,
        `this line is indented ${spaces(deeper.indent)}, deeper than line ${deeper.above} above it (${deeper.aboveIndent}), which already has its value: YAML reads this line as more of that value. Indent it like the keys it belongs with`,
      );
  }
  const line = source[start - 1] ?? '';
  if (said.startsWith('A block sequence may not be used as an implicit map key'))
    return at(
      start,
      `a list item ("${line.trim()}") among the keys of a map: indent it under the key whose list it is, or give it a key`,
    );
  const pair = /^\s*(?:- )?([^\s:#'"][^:#]*?):\s+(\S.*?)\s*$/.exec(line);
  if (error.code === 'BLOCK_AS_IMPLICIT_KEY' && pair && /:(\s|$)/.test(pair[2]))
    return at(
      start,
      `the value of ${pair[1]} holds ": ", which YAML reads as the start of another key: put the value in quotes (${pair[1]}: ${JSON.stringify(pair[2])})`,
    );
  const glued = /^\s*(?:- )?([\w.-]+):(\S.*)$/.exec(line);
  if (error.code === 'MULTILINE_IMPLICIT_KEY' && glued)
    return at(
      start,
      `"${glued[1]}:${glued[2]}" is read as text, not as a key and its value: put a space after the colon (${glued[1]}: ${glued[2]})`,
    );
  if (error.code === 'BAD_INDENT' || said.startsWith('Sequence item without - indicator')) {
    const levels = enclosing(source, start);
    if (levels.length)
      return at(
        start,
        `this line is indented ${spaces(keyColumn(line))}, where the lines above it are at ${levels.map((l) => `${l.indent} (line ${l.line})`).join(' or ')}: indent it like the keys it belongs with`,
      );
  }
  if (error.code === 'BAD_SCALAR_START')
    return at(
      start,
      `a value cannot start with "${text[error.pos[0]]}" unless it is quoted: put the value in quotes`,
    );
  if (said.startsWith('Missing , or : between flow') || error.code === 'BLOCK_IN_FLOW')
    return at(
      start,
      'inside [ ] or { }, entries are separated by commas and each key is followed by ": "; one of them is missing here',
    );
  return at(start, `YAML cannot read this line (${said.replace(/ at line \d+, column \d+:?$/, '')})`);
}

/** Where a line's content starts, past a list item's `- `: the column its keys line up at. */
function keyColumn(line: string): number {
  return /^[ ]*(?:- +)*/.exec(line)![0].length;
}

const leadingSpaces = (line: string): number => /^ */.exec(line)![0].length;

/** `key: value` or `key:`, also as a list item (`- key: value`). */
const KEY_LINE = /^\s*(?:- +)*[^\s#'"-][^:#]*:(\s|$)/;

const isContent = (line: string | undefined): line is string =>
  line !== undefined && line.trim() !== '' && !line.trim().startsWith('#');

/** The line before `n` that holds something, with its number. */
function contentAbove(source: string[], n: number): { line: number; text: string } | undefined {
  for (let i = n - 1; i >= 1; i--) if (isContent(source[i - 1])) return { line: i, text: source[i - 1] };
  return undefined;
}

/**
 * The first line from `from` to `to` that is indented deeper than the line above it while that line
 * opens no block (it ends in a value, not in `key:` or `-`): the usual mistake behind YAML's
 * "implicit keys" errors.
 */
function overIndented(
  source: string[],
  from: number,
  to: number,
): { line: number; indent: number; above: number; aboveIndent: number } | undefined {
  for (let n = Math.max(from, 2); n <= to; n++) {
    const text = source[n - 1];
    const above = contentAbove(source, n);
    if (!isContent(text) || !above) continue;
    // A list item is as deep as its dash; a key or a value, as its first character.
    const indent = /^\s*- /.test(text) ? leadingSpaces(text) : keyColumn(text);
    const opensBlock = /(:|^\s*-)\s*$/.test(above.text.replace(/\s#.*$/, ''));
    // A deeper line continues a `key: value`'s value, or a `- item`'s item.
    const aboveIndent = KEY_LINE.test(above.text) ? keyColumn(above.text) : leadingSpaces(above.text);
    if (!opensBlock && indent > aboveIndent) return { line: n, indent, above: above.line, aboveIndent };
  }
  return undefined;
}

/** The indentation levels open above line `n`: the line before it, then each less indented one. */
function enclosing(source: string[], n: number): Array<{ line: number; indent: number }> {
  const out: Array<{ line: number; indent: number }> = [];
  for (let above = contentAbove(source, n); above; above = contentAbove(source, above.line)) {
    const indent = keyColumn(above.text);
    if (out.length === 0 || indent < out[out.length - 1].indent) out.push({ line: above.line, indent });
    if (indent === 0) break;
  }
  return out;
}

/** The line of the last `char` before `offset`: where an unclosed bracket or quote opened. */
function lineOfLast(text: string, char: string, offset: number, lines: LineCounter): number | undefined {
  const at = text.lastIndexOf(char, Math.max(0, offset - 1));
  return at < 0 ? undefined : lines.linePos(at).line;
}

const spaces = (n: number) => `${n} space${n === 1 ? '' : 's'}`;
