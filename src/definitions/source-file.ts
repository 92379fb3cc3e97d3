import matter from 'gray-matter';
import {
  isAlias,
  isCollection,
  isMap,
  isNode,
  isPair,
  isScalar,
  isSeq,
  LineCounter,
  parseDocument,
  visit,
  type Document,
  type Node,
} from 'yaml';
import { bytes, DEFINITION_LIMITS, type DefinitionError } from './definition.js';
import { yamlSyntaxError } from './yaml-syntax.js';

/**
 * One definition file parsed with positions: the data (YAML, or a Markdown file's front matter), the
 * Markdown body, and a way back from a data path to the line that holds it.
 */
export class SourceFile {
  private constructor(
    readonly path: string,
    readonly data: unknown,
    readonly body: string,
    readonly errors: DefinitionError[],
    private readonly doc: Document | undefined,
    private readonly lines: LineCounter,
    /** About the bytes it holds in memory: its text and ~150 bytes per YAML node (measured). */
    readonly weight: number,
  ) {}

  static yaml(path: string, content: string): SourceFile {
    const lines = new LineCounter();
    const { doc, data, nodes, errors } = parseYaml(path, content, lines, 'not valid YAML');
    return new SourceFile(path, data, '', errors, doc, lines, weightOf(content, nodes));
  }

  /**
   * Markdown with optional YAML front matter: gray-matter with only the `yaml` engine. A tag on the
   * opening line (`---js`, `---json`) would choose another engine — its `javascript` one evaluates
   * the text — so a tagged opening is an error before gray-matter sees the file, and the other
   * engines are replaced by ones that refuse in case it ever chose one anyway.
   */
  static markdown(path: string, marked: string): SourceFile {
    // gray-matter drops a byte-order mark itself: dropped here first, so the tag check sees what it sees.
    const content = marked.replace(/^\uFEFF/, '');
    const lines = new LineCounter();
    const tag = FRONT_MATTER_OPENING.exec(content)?.[1].trim();
    if (tag)
      return new SourceFile(
        path,
        undefined,
        '',
        [
          {
            path,
            line: 1,
            message: `front matter must open with a bare \`---\` line; \`---${firstLine(tag)}\` would name an engine and only YAML is read`,
          },
        ],
        undefined,
        lines,
        0,
      );
    let doc: Document | undefined;
    let nodes = 0;
    const errors: DefinitionError[] = [];
    let parsed: { data: unknown; content: string };
    try {
      parsed = matter(content, {
        language: 'yaml',
        engines: {
          ...REFUSING_ENGINES,
          // The front matter text starts right after the opening `---`, so its line 1 is the file's.
          yaml: (text: string) => {
            const yaml = parseYaml(path, text, lines, 'front matter is not valid YAML');
            doc = yaml.doc;
            nodes = yaml.nodes;
            errors.push(...yaml.errors);
            return (yaml.data as object | undefined) ?? {};
          },
        },
      }) as { data: unknown; content: string };
    } catch (err) {
      errors.push({ path, line: 1, message: `front matter cannot be read: ${String(err)}` });
      parsed = { data: {}, content };
    }
    return new SourceFile(
      path,
      errors.length ? undefined : parsed.data,
      parsed.content,
      errors,
      doc,
      lines,
      weightOf(content, nodes),
    );
  }

  /**
   * The line of the key at `at` (a list of keys and indexes), or of the deepest part of it that
   * exists; line 1 when nothing does.
   */
  lineOf(at: Array<string | number>): number {
    let node: unknown = this.doc?.contents;
    let line = 1;
    for (const part of at) {
      if (isMap(node)) {
        const pair = node.items.find(
          (p) => isPair(p) && isScalar(p.key) && String(p.key.value) === String(part),
        );
        if (!pair) break;
        line = this.lineOfNode(pair.key as Node) ?? line;
        node = pair.value;
      } else if (isSeq(node) && typeof part === 'number' && node.items[part] !== undefined) {
        node = node.items[part];
        line = this.lineOfNode(node as Node) ?? line;
      } else break;
    }
    return line;
  }

  /**
   * A dotted path from a schema violation (`triggers.0.filter`) split back into keys. Keys may hold
   * dots themselves, so at each map the longest key that matches wins.
   */
  splitPath(dotted: string): Array<string | number> {
    if (dotted === '') return [];
    const parts = dotted.split('.');
    const out: Array<string | number> = [];
    let value: unknown = this.data;
    let i = 0;
    while (i < parts.length) {
      if (Array.isArray(value) && /^\d+$/.test(parts[i])) {
        out.push(Number(parts[i]));
        value = value[Number(parts[i])];
        i += 1;
        continue;
      }
      let taken = 1;
      if (value && typeof value === 'object') {
        for (let n = parts.length - i; n > 1; n--) {
          if (Object.hasOwn(value, parts.slice(i, i + n).join('.'))) {
            taken = n;
            break;
          }
        }
      }
      const key = parts.slice(i, i + taken).join('.');
      out.push(key);
      value = value && typeof value === 'object' ? (value as Record<string, unknown>)[key] : undefined;
      i += taken;
    }
    return out;
  }

  private lineOfNode(node: Node | undefined): number | undefined {
    return node?.range ? lineOfOffset(this.lines, node.range[0]) : undefined;
  }
}

/** gray-matter's opening delimiter: `---` not followed by a fourth `-`, and the rest of its line. */
const FRONT_MATTER_OPENING = /^---(?!-)([^\n]*)/;

const refuse = (): never => {
  throw new Error('only YAML front matter is read');
};
/** gray-matter's built-in engines other than `yaml` (`js` is an alias of `javascript`). */
const REFUSING_ENGINES = { json: refuse, javascript: refuse };

/**
 * One YAML document (a .yaml file or a front matter) parsed as data within DEFINITION_LIMITS: its
 * size, nesting depth and alias expansion; keys unique. Every problem is an error with the file's
 * line, never an exception. Duplicate keys are checked here with a set: the parser's own check
 * compares every key with every other (a 150 KB map of keys took 7 s).
 */
function parseYaml(
  path: string,
  text: string,
  lines: LineCounter,
  what: string,
): { doc?: Document; data?: unknown; nodes: number; errors: DefinitionError[] } {
  const size = Buffer.byteLength(text, 'utf8');
  if (size > DEFINITION_LIMITS.yamlBytes)
    return {
      errors: [
        {
          path,
          line: 1,
          message: `${what}: it is ${bytes(size)} of YAML; the limit is ${bytes(DEFINITION_LIMITS.yamlBytes)}`,
        },
      ],
      nodes: 0,
    };
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: false, uniqueKeys: false });
  const errors: DefinitionError[] = [];
  if (doc.errors.length) {
    const { line, message } = yamlSyntaxError(doc.errors[0], text, lines);
    errors.push({ path, line, message: `${what}: ${message}` });
  }
  const lineOf = (node: Node) => (node.range ? lineOfOffset(lines, node.range[0]) : 1);
  let firstAlias: number | undefined;
  let nodes = 0;
  visit(doc, (_, node, ancestors) => {
    if (isAlias(node)) firstAlias ??= lineOf(node);
    if (!isNode(node)) return;
    if (++nodes > DEFINITION_LIMITS.yamlNodes) {
      errors.push({
        path,
        line: lineOf(node),
        message: `${what}: it holds more than ${DEFINITION_LIMITS.yamlNodes} values (keys, scalars, lists, maps)`,
      });
      return visit.BREAK;
    }
    if (!isCollection(node)) return;
    const depth = ancestors.filter((a) => isCollection(a)).length + 1;
    if (depth > DEFINITION_LIMITS.yamlDepth) {
      errors.push({
        path,
        line: lineOf(node),
        message: `${what}: it nests more than ${DEFINITION_LIMITS.yamlDepth} levels deep`,
      });
      return visit.BREAK;
    }
    if (!isMap(node)) return;
    const keys = new Set<string>();
    for (const pair of node.items) {
      if (!isScalar(pair.key)) continue;
      const key = String(pair.key.value);
      if (keys.has(key))
        errors.push({ path, line: lineOf(pair.key), message: `${what}: the key "${key}" appears twice` });
      keys.add(key);
    }
  });
  if (errors.length) return { doc, nodes, errors };
  try {
    return { doc, nodes, data: doc.toJS({ maxAliasCount: DEFINITION_LIMITS.yamlAliasCount }) ?? {}, errors };
  } catch (err) {
    // The yaml package's guard against an alias bomb (or anything else it refuses to build).
    const reason =
      err instanceof ReferenceError ? 'its aliases expand too much (an alias bomb)' : String(err);
    return { doc, nodes, errors: [{ path, line: firstAlias ?? 1, message: `${what}: ${reason}` }] };
  }
}

function weightOf(content: string, yamlNodes: number): number {
  return Buffer.byteLength(content, 'utf8') + 150 * yamlNodes;
}

function lineOfOffset(lines: LineCounter, offset: number): number {
  return lines.linePos(offset).line;
}

function firstLine(text: string): string {
  return text.split('\n')[0];
}
