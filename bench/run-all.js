// `npm run bench [-- NAME…]`: runs bench/<name>.bench.js one after another (all when no name is
// given), each in its own process. A benchmark prints its figures, its baseline and the ratio; it
// never fails on a time.
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';

const dir = new URL('.', import.meta.url).pathname;
const all = readdirSync(dir)
  .filter((f) => f.endsWith('.bench.js'))
  .map((f) => f.replace(/\.bench\.js$/, ''))
  .sort();
const wanted = process.argv.slice(2);
const chosen = wanted.length ? wanted : all;
for (const name of chosen) {
  if (!all.includes(name)) {
    console.error(`no benchmark ${name}; there are: ${all.join(', ')}`);
    process.exit(2);
  }
  console.log(`\n=== bench/${name}`);
  const r = spawnSync(process.execPath, [`${dir}${name}.bench.js`], { stdio: 'inherit' });
  if (r.status !== 0) process.exit(r.status ?? 1);
}
