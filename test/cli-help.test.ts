import type { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { buildProgram } from '../src/cli/program.js';

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

  it('lists the commands of CONTRACT.md §7', () => {
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
