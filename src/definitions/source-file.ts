import matter from 'gray-matter';
import { isMap, isPair, isScalar, isSeq, LineCounter, parseDocument, type Document, type Node } from 'yaml';
import type { DefinitionError } from './definition.js';

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
  ) {}

  static yaml(path: string, content: string): SourceFile {
    const lines = new LineCounter();
    const doc = parseDocument(content, { lineCounter: lines, prettyErrors: false });
    const errors = doc.errors.map((e) => ({
      path,
      line: lineOfOffset(lines, e.pos[0]),
      message: `not valid YAML: ${firstLine(e.message)}`,
    }));
    return new SourceFile(path, errors.length ? undefined : (doc.toJS() ?? {}), '', errors, doc, lines);
  }

  /** Markdown with optional YAML front matter (gray-matter, the `yaml` engine). */
  static markdown(path: string, content: string): SourceFile {
    const lines = new LineCounter();
    let doc: Document | undefined;
    const errors: DefinitionError[] = [];
    let parsed: { data: unknown; content: string };
    try {
      parsed = matter(content, {
        engines: {
          // The front matter text starts right after the opening `---`, so its line 1 is the file's.
          yaml: (text: string) => {
            doc = parseDocument(text, { lineCounter: lines, prettyErrors: false });
            for (const e of doc.errors) {
              errors.push({
                path,
                line: lineOfOffset(lines, e.pos[0]),
                message: `front matter is not valid YAML: ${firstLine(e.message)}`,
              });
            }
            return errors.length ? {} : ((doc.toJS() as object | null) ?? {});
          },
        },
      }) as { data: unknown; content: string };
    } catch (err) {
      errors.push({ path, line: 1, message: `front matter cannot be read: ${String(err)}` });
      parsed = { data: {}, content };
    }
    return new SourceFile(path, errors.length ? undefined : parsed.data, parsed.content, errors, doc, lines);
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

function lineOfOffset(lines: LineCounter, offset: number): number {
  return lines.linePos(offset).line;
}

function firstLine(message: string): string {
  return message.split('\n')[0].replace(/ at line \d+, column \d+:?$/, '');
}
