import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { fromRoot } from '../src/common/paths.js';

/**
 * The layer table of docs/architecture.md, checked against every import in src/: a module uses only
 * modules on lower layers (never one beside or above it), except the exceptions the page lists. The
 * table is read from the page, so the page cannot drift from the code.
 */
const PAGE = readFileSync(fromRoot('docs', 'architecture.md'), 'utf8');

/** `runs/` → 'runs', `main.ts` → 'main.ts': the module a path of src/ belongs to. */
const moduleOf = (path: string): string => path.split('/')[0]!;

function layerTable(): Map<string, number> {
  const layers = new Map<string, number>();
  const section = PAGE.slice(PAGE.indexOf('## Layers'));
  for (const row of section.matchAll(/^\| (\d+) +\| (.+?) *\|$/gm)) {
    for (const name of row[2]!.matchAll(/`([^`]+)`/g))
      layers.set(name[1]!.replace(/\/$/, ''), Number(row[1]));
  }
  return layers;
}

/** "`from/` → `to/`" lines of the page's exceptions list. */
function exceptions(): Set<string> {
  const section = PAGE.slice(PAGE.indexOf('### Exceptions'));
  return new Set([...section.matchAll(/^- `([^`]+)` → `([^`]+)`/gm)].map((m) => `${m[1]} → ${m[2]}`));
}

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sources(path);
    return name.endsWith('.ts') && !name.endsWith('.spec.ts') ? [path] : [];
  });
}

interface Import {
  file: string;
  from: string;
  to: string;
}

function imports(): Import[] {
  const src = fromRoot('src');
  return sources(src).flatMap((file) => {
    const text = readFileSync(file, 'utf8');
    const from = moduleOf(relative(src, file));
    return [...text.matchAll(/(?:^|\n)\s*(?:import|export)[^;]*?from '(\.[^']+)'/g)].flatMap((m) => {
      const target = relative(src, resolve(dirname(file), m[1]!)).replace(/\.js$/, '.ts');
      const to = moduleOf(target);
      return to === from ? [] : [{ file: relative(src, file), from, to }];
    });
  });
}

describe('the layers of docs/architecture.md', () => {
  const layers = layerTable();
  const allowed = exceptions();

  it('name every module of src/', () => {
    const modules = readdirSync(fromRoot('src')).filter((n) => !n.endsWith('.spec.ts'));
    const missing = modules.filter((m) => !layers.has(m));
    expect(missing, 'modules of src/ the layer table does not place').toEqual([]);
  });

  it('hold: every import goes to a lower layer, or is a listed exception', () => {
    const wrong = imports()
      .filter(({ file, from, to }) => {
        if (layers.get(to)! < layers.get(from)!) return false;
        const folder = dirname(file);
        return !allowed.has(`${from}/ → ${to}/`) && !allowed.has(`${folder}/ → ${to}/`);
      })
      .map(
        ({ file, to }) => `${file} → ${to} (layer ${layers.get(file.split('/')[0]!)} → ${layers.get(to)})`,
      );
    expect([...new Set(wrong)]).toEqual([]);
  });

  it('lists no exception the code no longer needs', () => {
    const used = new Set(
      imports().flatMap(({ file, from, to }) => [`${from}/ → ${to}/`, `${dirname(file)}/ → ${to}/`]),
    );
    expect([...allowed].filter((e) => !used.has(e))).toEqual([]);
  });
});

/** The rooms table of docs/architecture.md ("Inside `workers/`"): room → the rooms it may use. */
function workerRooms(): Map<string, Set<string>> {
  const section = PAGE.slice(PAGE.indexOf('### Inside `workers/`'), PAGE.indexOf('### Exceptions'));
  const rooms = new Map<string, Set<string>>();
  for (const row of section.matchAll(/^\| `(workers\/[a-z]+)\/` +\|.*\| (.*?) *\|$/gm))
    rooms.set(row[1]!, new Set([...row[2]!.matchAll(/`(workers\/[a-z]+)\/`/g)].map((m) => m[1]!)));
  return rooms;
}

describe('the rooms of workers/ (docs/architecture.md)', () => {
  const rooms = workerRooms();
  /** `workers/queue/x.ts` → 'workers/queue'; the module's own file (workers.module.ts) → undefined. */
  const roomOf = (path: string) => /^(workers\/[a-z]+)\//.exec(path)?.[1];

  it('name every folder of workers/', () => {
    const folders = readdirSync(fromRoot('src', 'workers')).filter((n) =>
      statSync(fromRoot('src', 'workers', n)).isDirectory(),
    );
    expect(folders.map((f) => `workers/${f}`).sort()).toEqual([...rooms.keys()].sort());
    const loose = readdirSync(fromRoot('src', 'workers')).filter((n) => n.endsWith('.ts'));
    expect(loose, 'files of workers/ outside a room (only the composition)').toEqual(['workers.module.ts']);
  });

  it('hold: a room uses only the rooms its row names', () => {
    const src = fromRoot('src');
    const wrong = sources(join(src, 'workers')).flatMap((file) => {
      const from = roomOf(relative(src, file));
      if (!from) return [];
      return [...readFileSync(file, 'utf8').matchAll(/(?:^|\n)\s*(?:import|export)[^;]*?from '(\.[^']+)'/g)]
        .map((m) => roomOf(relative(src, resolve(dirname(file), m[1]!))))
        .filter((to) => to && to !== from && !rooms.get(from)!.has(to))
        .map((to) => `${relative(src, file)} → ${to}`);
    });
    expect(wrong).toEqual([]);
  });
});
