import type { Command } from 'commander';
import { ApiClient, apiOptions, type ApiOptions } from '../api-client.js';
import { print, renderTable } from '../output.js';
import type { EventTypes, NotificationEndpointCreateRequest } from '../../contract/generated.js';

type Opts = ApiOptions & { json?: boolean };

/** `factoryd notifications …`: signed notifications out, over the API. */
export function registerNotificationsCommands(program: Command): void {
  const notifications = program
    .command('notifications')
    .description('Subscribe HTTPS endpoints to run and delivery events; read the attempt log; resend.')
    .addHelpText('after', '\nExample:\n  FACTORYD_API_KEY=fdk_… npx factoryd notifications list');

  apiOptions(notifications.command('list'))
    .description('List the team’s notification endpoints.')
    .option('--json', 'print JSON')
    .addHelpText('after', '\nExample:\n  npx factoryd notifications list --json')
    .action(async (o: Opts) => {
      const res = await new ApiClient(o).api.call('listNotificationEndpoints');
      print(o, res, () =>
        res.endpoints.length === 0
          ? 'No notification endpoints; add one with `factoryd notifications create NAME --url URL`.'
          : renderTable(
              ['ID', 'NAME', 'ENABLED', 'EVENTS', 'URL'],
              res.endpoints.map((e) => [
                e.id,
                e.name,
                e.enabled ? 'yes' : `no (${e.disabled_reason ?? 'disabled'})`,
                e.event_types.length ? e.event_types.join(',') : 'all',
                e.url,
              ]),
            ),
      );
    });

  apiOptions(notifications.command('create <name>'))
    .description('Subscribe an endpoint; its whsec_ signing secret is printed once.')
    .requiredOption('--url <url>', 'where to POST (https://)')
    .option('--events <types>', 'comma-separated event types, e.g. run.succeeded,run.failed (default: all)')
    .option('--description <text>', 'what it is for')
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      '\nExample:\n  npx factoryd notifications create alerts --url https://hooks.example.com/factoryd --events run.failed,run.error',
    )
    .action(async (name: string, o: Opts & { url: string; events?: string; description?: string }) => {
      const body: NotificationEndpointCreateRequest = { name, url: o.url };
      // The service names the known event types when one is wrong (400).
      if (o.events) body.event_types = o.events.split(',').map((t) => t.trim()) as EventTypes;
      if (o.description) body.description = o.description;
      const created = await new ApiClient(o).api.call('createNotificationEndpoint', { body });
      print(o, created, () =>
        [
          `Created notification endpoint ${created.endpoint.name} (${created.endpoint.id}).`,
          `Signing secret (shown once; verify webhook-signature with it):`,
          '',
          `  ${created.secret}`,
        ].join('\n'),
      );
    });

  apiOptions(notifications.command('attempts <endpointId>'))
    .description('The attempt log of an endpoint, newest first.')
    .option('--message <id>', 'only this message’s attempts')
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      '\nExample:\n  npx factoryd notifications attempts 0b6f…  # the endpoint id from `notifications list`',
    )
    .action(async (id: string, o: Opts & { message?: string }) => {
      const res = await new ApiClient(o).api.call('listNotificationAttempts', {
        id,
        query: { message_id: o.message },
      });
      print(o, res, () =>
        res.attempts.length === 0
          ? 'No attempts yet.'
          : renderTable(
              ['AT', 'MESSAGE', 'RESULT', 'STATUS', 'LATENCY', 'ERROR'],
              res.attempts.map((a) => [
                a.attempted_at,
                a.message_id,
                a.succeeded ? 'ok' : 'failed',
                a.status_code,
                `${a.latency_ms} ms`,
                a.error,
              ]),
            ),
      );
    });

  apiOptions(notifications.command('resend <endpointId> <messageId>'))
    .description('Send a message again now (the whole retry schedule is ahead of it again).')
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      '\nExample:\n  npx factoryd notifications resend 0b6f… 9c1d…  # endpoint id, message id (from `attempts`)',
    )
    .action(async (id: string, messageId: string, o: Opts) => {
      const m = await new ApiClient(o).api.call('resendNotification', { id, messageId });
      print(o, m, () => `Queued ${m.type} message ${m.id} to go out again.`);
    });
}
