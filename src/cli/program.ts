import { readFileSync } from 'node:fs';
import { Command } from 'commander';
import { fromRoot } from '../common/paths.js';
import { registerAuthCommands } from './commands/auth.commands.js';
import { registerRunsCommands } from './commands/runs.commands.js';
import { registerFactoryCommands } from './commands/factories.commands.js';
import { registerSecretsCommands } from './commands/secrets.commands.js';
import { registerServeCommand } from './commands/serve.command.js';
import { registerSkillsCommands } from './commands/skills.commands.js';
import { registerWebhooksCommands } from './commands/webhooks.commands.js';
import { registerNotificationsCommands } from './commands/notifications.commands.js';
import { registerWorkerCommands } from './commands/worker.commands.js';
import { registerHarnessesCommands } from './commands/harnesses.commands.js';

/** Each module's commands, in the order `factoryd --help` lists them. */
const COMMANDS: Array<(program: Command) => void> = [
  registerServeCommand,
  registerAuthCommands,
  registerRunsCommands,
  registerFactoryCommands,
  registerSecretsCommands,
  registerWebhooksCommands,
  registerWorkerCommands,
  registerHarnessesCommands,
  registerSkillsCommands,
  registerNotificationsCommands,
];

export function buildProgram(): Command {
  const program = new Command('factoryd')
    .description('Run cloud coding agents from code and from events.')
    .version(packageVersion(), '-V, --version', 'print the version (from package.json)')
    .showHelpAfterError()
    .addHelpText(
      'after',
      '\nExamples:\n  npx factoryd serve\n  npx factoryd api-keys create --team default --scopes runs:read,runs:write',
    );
  for (const register of COMMANDS) register(program);
  return program;
}

function packageVersion(): string {
  return (JSON.parse(readFileSync(fromRoot('package.json'), 'utf8')) as { version: string }).version;
}
