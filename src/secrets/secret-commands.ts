import { cliCommand } from '../common/cli-command.js';
import type { SecretKind } from './secret-generator.js';

/**
 * The command that gives a team secret a value, as advice to paste at a terminal in a checkout:
 * through `npx` (cliCommand), and with no pipe needed (at a terminal `secrets set` asks for the value, unechoed;
 * in a script the value comes on stdin).
 */
export function setSecretCommand(name: string, opts: { team?: string; generate?: SecretKind } = {}): string {
  return `\`${cliCommand(`secrets set ${name}${opts.team ? ` --team ${opts.team}` : ''}${opts.generate ? ` --generate ${opts.generate}` : ''}`)}\``;
}
