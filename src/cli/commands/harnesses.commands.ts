import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Command } from 'commander';
import { dataDirOf } from '../../config/config.js';
import { BUILT_IN_HARNESSES, HARNESSES, type BuiltInHarness } from '../../harnesses/harness-types.js';
import { describeClis, detectClis, harnessesDir } from '../../harnesses/installed-clis.js';
import { print } from '../output.js';

/** `factoryd harnesses`: the agent CLIs this machine has, and installing one where workers find it. */
export function registerHarnessesCommands(program: Command): void {
  const harnesses = program
    .command('harnesses')
    .description(
      'The agent CLIs (Claude Code, Codex, Gemini CLI) that built-in harnesses run (docs/harnesses.md).',
    )
    .addHelpText(
      'after',
      '\nExamples:\n  npx factoryd harnesses list\n  npx factoryd harnesses install claude',
    );
  harnesses
    .command('list')
    .description(
      'The CLIs found here (CLAUDE_COMMAND/CODEX_COMMAND/GEMINI_COMMAND, the install folder, PATH) and their versions.',
    )
    .option('--json', 'print JSON')
    .addHelpText('after', '\nExample:\n  npx factoryd harnesses list --json')
    .action(async (opts: { json?: boolean }) => {
      const clis = await detectClis(process.env, harnessesDir(process.env, dataDirOf()));
      print(opts, { harnesses_dir: harnessesDir(process.env, dataDirOf()), clis }, () => describeClis(clis));
    });
  harnesses
    .command('install <type>')
    .description(
      `Install an agent CLI through npm into the folder the service and its workers look in ` +
        `(HARNESSES_DIR; as root /var/lib/factoryd/harnesses, else $DATA_DIR/harnesses). Types: ${BUILT_IN_HARNESSES.join(', ')}.`,
    )
    .option('--version <version>', 'the npm version or tag to install (default: the newest this Node runs)')
    .addHelpText('after', '\nExample:\n  npx factoryd harnesses install claude')
    .action(async (type: string, opts: { version?: string }) => {
      if (!(BUILT_IN_HARNESSES as readonly string[]).includes(type))
        throw new Error(`unknown harness "${type}": one of ${BUILT_IN_HARNESSES.join(', ')}`);
      const info = HARNESSES[type as BuiltInHarness];
      const base = harnessesDir(process.env, dataDirOf());
      const prefix = join(base, type);
      mkdirSync(prefix, { recursive: true });
      // Harnesses run as other uids (as root): they must reach the CLI, read-only.
      for (const dir of [base, prefix]) chmodSync(dir, 0o755);
      const spec = `${info.npmPackage}${opts.version ? `@${opts.version}` : ''}`;
      process.stdout.write(`installing ${spec} into ${prefix} …\n`);
      const started = Date.now();
      const npm = join(dirname(process.execPath), 'npm');
      const out = spawnSync(
        npm,
        ['install', '--prefix', prefix, '--no-audit', '--no-fund', '--omit=dev', spec],
        {
          stdio: 'inherit',
        },
      );
      if (out.status !== 0) throw new Error(`npm install ${spec} failed (exit ${out.status ?? out.signal})`);
      const [cli] = (await detectClis({ PATH: '', HOME: process.env.HOME }, base)).filter(
        (c) => c.type === type,
      );
      if (!cli || cli.problem)
        throw new Error(`${info.title} was installed but does not start: ${cli?.problem ?? 'not found'}`);
      process.stdout.write(
        `${info.title} ${cli.version ?? ''} installed at ${cli.path} in ${((Date.now() - started) / 1000).toFixed(1)} s; ` +
          `restart the service (or its workers) to use it\n`,
      );
    });
}
