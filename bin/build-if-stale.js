#!/usr/bin/env node
// Generates the API contract from schemas/ when a schema changed (bin/generate-contract.js), then
// builds `dist/` (the service: tsc; the dashboard: vite) only where a source is newer than what was
// built from it: `npm start` then costs no build on a restart, and the test setup builds once, before
// any test file spawns the binary. Run as a script (the first step of `npm start`), or imported (tests).
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const at = (...parts) => join(root, ...parts);

/** Builds what is stale; says so on stderr when it builds. */
export function buildIfStale() {
  // The API contract (src/contract/generated.ts) first: both builds import it.
  execFileSync(process.execPath, [at('bin', 'generate-contract.js')], {
    stdio: ['ignore', 'ignore', 'inherit'],
    cwd: root,
  });
  const service = [at('tsconfig.json'), at('tsconfig.build.json'), ...files(at('src'))];
  if (stale(at('dist', 'cli', 'main.js'), service))
    build('the service', 'typescript/bin/tsc', ['-p', at('tsconfig.build.json')]);
  if (stale(at('dist', 'web', 'index.html'), [...files(at('web')), ...sharedWithWeb()]))
    build('the dashboard', 'vite/bin/vite.js', ['build', '--config', at('web', 'vite.config.ts')]);
}

function stale(output, sources) {
  const built = existsSync(output) ? statSync(output).mtimeMs : 0;
  return sources.some((f) => statSync(f).mtimeMs > built);
}

function build(what, tool, args) {
  process.stderr.write(`building ${what}…\n`);
  execFileSync(process.execPath, [at('node_modules', tool), ...args], {
    stdio: ['ignore', 'ignore', 'inherit'],
    cwd: root,
  });
}

/** The service's files the dashboard imports (`../../src/…`, import-free modules both builds share). */
function sharedWithWeb() {
  const shared = new Set();
  for (const file of files(at('web', 'src'))) {
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(/from '((?:\.\.\/)+src\/[^']+)'/g))
      shared.add(join(dirname(file), `${m[1].replace(/\.js$/, '')}.ts`));
  }
  return [...shared];
}

function files(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? files(join(dir, e.name)) : [join(dir, e.name)],
  );
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) buildIfStale();
