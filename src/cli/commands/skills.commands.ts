import type { Command } from 'commander';
import { teamNamed, withServices } from '../context.js';
import { print, renderTable } from '../output.js';

/** `factoryd skills usage`: the team-owned skill usage report (docs/workers.md). */
export function registerSkillsCommands(program: Command): void {
  const skills = program
    .command('skills')
    .description('Skills the team manages in its factories.')
    .addHelpText('after', '\nExample:\n  npx factoryd skills usage --json');
  skills
    .command('usage')
    .description(
      'Team-owned skill loads (bundled skills listed apart; loads outside managed skill roots not counted).',
    )
    .option('--since <date>', 'only loads on or after this date (e.g. 2026-01-31)')
    .option('--team <team>', 'team name or uid', 'default')
    .option('--json', 'print JSON')
    .addHelpText('after', '\nExample:\n  npx factoryd skills usage --since 2026-01-01')
    .action(async (opts: { since?: string; team: string; json?: boolean }) => {
      // The conversations' module for this command only: with its API it loads what others need not.
      const [{ ConversationsModule }, { ConversationsService }] = await Promise.all([
        import('../../conversations/conversations.module.js'),
        import('../../conversations/conversations.service.js'),
      ]);
      await withServices(
        async (services) => {
          const team = await teamNamed(services, opts.team);
          const report = await services.get(ConversationsService).skillUsage(team.id, opts.since);
          print(opts, report, () =>
            [
              renderTable(
                ['FACTORY', 'SKILL', 'LOADS', 'RUNS', 'LAST LOADED'],
                report.skills.map((s) => [s.factory, s.skill, s.loads, s.runs, s.last_loaded_at]),
              ),
              '',
              renderTable(
                ['BUNDLED SKILL', 'LOADS'],
                report.bundled.map((b) => [b.bundled_skill_id, b.loads]),
              ),
              '',
              `Not counted (outside the team's skill roots): ${report.not_counted.outside_managed_roots}`,
            ].join('\n'),
          );
        },
        { modules: [ConversationsModule] },
      );
    });
}
