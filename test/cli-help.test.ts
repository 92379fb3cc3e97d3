import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { buildProgram } from '../src/cli/program.js';
import { fromRoot } from '../src/common/paths.js';

/** Every command of the binary, by its full name (`factoryd webhooks create`). */
function commandsOf(cmd: Command, prefix = 'factoryd'): Array<[string, Command]> {
  return cmd.commands.flatMap((c): Array<[string, Command]> => {
    const name = `${prefix} ${c.name()}`;
    return [[name, c], ...commandsOf(c, name)];
  });
}

function helpOf(cmd: Command): string {
  let text = '';
  cmd.configureOutput({ writeOut: (s) => (text += s), writeErr: (s) => (text += s) });
  cmd.outputHelp();
  return text;
}

describe('factoryd --help', () => {
  const program = buildProgram();
  const all = commandsOf(program);

  it('lists the commands of README.md', () => {
    const names = all.map(([n]) => n);
    for (const expected of [
      'factoryd serve',
      'factoryd worker',
      'factoryd validate',
      'factoryd plan',
      'factoryd apply',
      'factoryd factories add',
      'factoryd factories list',
      'factoryd teams create',
      'factoryd api-keys create',
      'factoryd api-keys list',
      'factoryd api-keys revoke',
      'factoryd secrets set',
      'factoryd secrets list',
      ...[
        'list',
        'show',
        'create',
        'enable',
        'disable',
        'rotate',
        'set-secret',
        'delete',
        'deliveries',
        'test-filter',
      ].map((v) => `factoryd webhooks ${v}`),
      ...['create', 'list', 'show', 'followup', 'cancel', 'watch'].map((v) => `factoryd runs ${v}`),
      'factoryd skills usage',
    ]) {
      expect(names).toContain(expected);
    }
  });

  it('every command and subcommand is in the README’s command table (issue #30, 8)', () => {
    const readme = readFileSync(fromRoot('README.md'), 'utf8');
    const table = readme.slice(
      readme.indexOf('| Command '),
      readme.indexOf('\n\n', readme.indexOf('| Command ')),
    );
    // The words of the table's code spans: `runs create`, `list`, … name `runs list` too.
    const words = new Set([...table.matchAll(/`([^`]+)`/g)].flatMap((m) => m[1]!.split(/[\s,|\\[\]]+/)));
    const missing = all
      .map(([name]) => name.split(' ').slice(1))
      .filter((path) => path.at(-1) !== 'help' && path.some((part) => !words.has(part)))
      .map((path) => path.join(' '));
    expect(missing).toEqual([]);
  });

  it('calls validate what it is: its checks of secrets and UIDs need the running service', () => {
    const validate = all.find(([name]) => name === 'factoryd validate')![1];
    expect(validate.description()).not.toMatch(/folder offline/);
    expect(validate.description()).toContain('against a factoryd serve running on this DATA_DIR');
  });

  it.each(all.map(([name, cmd]) => [name, cmd] as const))(
    '%s says what it does, with an example',
    (_, cmd) => {
      expect(cmd.description().length).toBeGreaterThan(10);
      expect(helpOf(cmd)).toMatch(/Examples?( \([^)]*\))?:\n {2}\S/);
    },
  );

  it('the top level shows examples too', () => {
    expect(helpOf(program)).toMatch(/Examples?:\n {2}npx factoryd/);
  });
});
