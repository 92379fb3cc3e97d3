import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { ApiCallFailed, ApiClient, apiOptions, type ApiOptions } from '../api-client.js';
import { print, renderTable } from '../output.js';
import { readSecret } from '../stdin.js';
import type {
  DeliveryDetail,
  DeliveryItem,
  DeliveryStatus,
  FactoryItem,
  WebhookCreateRequest,
  WebhookItem,
  WebhookSummary,
  WebhookTestFilterRequest,
  WebhookTestFilterResponse,
  WebhookWithSecret,
} from '../../contract/generated.js';
import { cliCommand } from '../../common/cli-command.js';

type Opts = ApiOptions & { json?: boolean };

/** How people read delivery statuses (the wire has `rejected_auth`, …). */
const STATUS_LABELS: Record<DeliveryStatus, string> = {
  accepted: 'Accepted',
  duplicate: 'Duplicate',
  rejected_auth: 'Rejected (auth)',
  rejected_invalid_json: 'Rejected (invalid JSON)',
  rejected_too_large: 'Rejected (too large)',
  replayed: 'Replayed',
};

const path = (uid: string, rest = '') => `/webhooks/${encodeURIComponent(uid)}${rest}`;

/** `factoryd webhooks …`: the dashboard's webhook operations over the management API. */
export function registerWebhooksCommands(program: Command): void {
  const webhooks = program
    .command('webhooks')
    .description('Create, inspect, toggle, rotate and delete webhooks; read deliveries; test a filter.')
    .addHelpText(
      'after',
      '\nExample:\n  FACTORYD_API_KEY=fdk_… npx factoryd webhooks create ci-alerts --factory ops',
    );

  apiOptions(webhooks.command('list'))
    .description('List the webhooks of a factory.')
    .option('--factory <nameOrUid>', 'the factory (default: the team’s only factory)')
    .option('--include-deleted', 'also list deleted webhooks')
    .option('--json', 'print JSON')
    .addHelpText('after', '\nExample:\n  npx factoryd webhooks list --factory example')
    .action(async (o: Opts & { factory?: string; includeDeleted?: boolean }) => {
      const client = new ApiClient(o);
      const factory = await resolveFactory(client, o.factory);
      const res = await client.api.call('listFactoryWebhooks', {
        uid: factory.uid,
        query: { include_deleted: o.includeDeleted ? 'true' : undefined },
      });
      print(o, res, () =>
        res.webhooks.length === 0
          ? `Factory ${factory.name} has no webhooks; create one with \`${cliCommand('webhooks create')}\`.`
          : renderTable(
              ['UID', 'NAME', 'AUTH', 'ENABLED', 'SECRET', 'URL'],
              res.webhooks.map((w) => [
                w.uid,
                w.name,
                authLabel(w),
                w.deleted ? 'deleted' : w.enabled ? 'yes' : 'no',
                w.secret_name,
                w.ingress_url,
              ]),
            ),
      );
    });

  apiOptions(webhooks.command('show <uid>'))
    .description('Show one webhook (a url_token URL shows {token} in place of the secret).')
    .option('--json', 'print JSON')
    .addHelpText('after', '\nExample:\n  npx factoryd webhooks show 7fK2pQ9xLm3Rt5Vw8Yz1Ab')
    .action(async (uid: string, o: Opts) => {
      const client = new ApiClient(o);
      const w = await client.api.call('getWebhook', { uid });
      // For people, the factory by its name too (the webhook names it by UID).
      const factory =
        o.json || !w.factory_uid ? undefined : await client.api.call('getFactory', { uid: w.factory_uid });
      print(o, w, () => describeWebhook(w, factory?.name));
    });

  apiOptions(webhooks.command('create <name>'))
    .description(
      'Create a webhook in a managed factory. A generated secret (token, url_token, Standard Webhooks) is printed once.',
    )
    .option('--factory <nameOrUid>', 'the factory (default: the team’s only factory)')
    .option('--auth-mode <mode>', 'token | url_token | signature', 'token')
    .option(
      '--scheme <scheme>',
      'signature scheme: standard_webhooks, github, stripe, slack, shopify, gitlab, linear, sentry, pagerduty, vercel',
    )
    .option(
      '--secret-name <name>',
      'team secret to hold the value (default: webhook-<name>); may name an existing one',
    )
    .option(
      '--secret-stdin',
      'the provider’s signing secret, from stdin or asked for at a terminal (signature mode)',
    )
    .option('--delivery-id-header <header>', 'header that identifies a delivery, for dedupe')
    .option('--description <text>', 'what the webhook is for')
    .option('--disabled', 'create it disabled')
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      [
        '',
        'Examples:',
        '  npx factoryd webhooks create ci-alerts --factory ops',
        '  printf %s "$GITHUB_SECRET" | npx factoryd webhooks create github --auth-mode signature --scheme github --secret-stdin',
        '  npx factoryd webhooks create stripe --auth-mode signature --scheme stripe   # disabled until `set-secret`',
      ].join('\n'),
    )
    .action(
      async (
        name: string,
        o: Opts & {
          factory?: string;
          authMode: string;
          scheme?: string;
          secretName?: string;
          secretStdin?: boolean;
          deliveryIdHeader?: string;
          description?: string;
          disabled?: boolean;
        },
      ) => {
        const client = new ApiClient(o);
        const factory = await resolveFactory(client, o.factory);
        const body: WebhookCreateRequest = {
          name,
          // The service names the allowed values when one is wrong (400).
          auth_mode: o.authMode as WebhookCreateRequest['auth_mode'],
          signature_scheme: o.scheme as WebhookCreateRequest['signature_scheme'],
          secret_name: o.secretName,
          delivery_id_header: o.deliveryIdHeader,
          description: o.description,
          ...(o.disabled ? { enabled: false } : {}),
        };
        if (o.secretStdin) body.secret = await readSecret('the provider’s signing secret');
        const created = await client.api.call('createWebhook', { uid: factory.uid, body });
        print(o, created, () =>
          describeWithSecret(`Created webhook ${created.webhook.name}`, created, factory.name),
        );
      },
    );

  for (const [verb, description] of [
    ['enable', 'Enable a webhook: senders are accepted again.'],
    ['disable', 'Disable a webhook: senders get 404 until it is enabled.'],
  ] as const) {
    apiOptions(webhooks.command(`${verb} <uid>`))
      .description(description)
      .option('--json', 'print JSON')
      .addHelpText('after', `\nExample:\n  npx factoryd webhooks ${verb} 7fK2pQ9xLm3Rt5Vw8Yz1Ab`)
      .action(async (uid: string, o: Opts) => {
        const w = await new ApiClient(o).api.call(verb === 'enable' ? 'enableWebhook' : 'disableWebhook', {
          uid,
        });
        print(o, w, () => `Webhook ${w.name} (${w.uid}) is ${w.enabled ? 'enabled' : 'disabled'}.`);
      });
  }

  apiOptions(webhooks.command('rotate <uid>'))
    .description('Give a webhook a new generated secret, printed once; the old one stops working at once.')
    .option('--json', 'print JSON')
    .addHelpText('after', '\nExample:\n  npx factoryd webhooks rotate 7fK2pQ9xLm3Rt5Vw8Yz1Ab')
    .action(async (uid: string, o: Opts) => {
      const res = await new ApiClient(o).api.call('rotateWebhook', { uid });
      print(o, res, () => describeWithSecret(`Rotated the secret of ${res.webhook.name}`, res));
    });

  apiOptions(webhooks.command('set-secret <uid>'))
    .description(
      'Set the signing secret a provider issued (typed at the prompt or piped on stdin), or --generate one for Standard Webhooks; enables a webhook that waited for it.',
    )
    .option('--generate', 'let the service generate it (Standard Webhooks: whsec_…), printed once')
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      [
        '',
        'Examples:',
        '  printf %s "$STRIPE_WEBHOOK_SECRET" | npx factoryd webhooks set-secret 7fK2pQ9xLm3Rt5Vw8Yz1Ab',
        '  npx factoryd webhooks set-secret 7fK2pQ9xLm3Rt5Vw8Yz1Ab --generate',
      ].join('\n'),
    )
    .action(async (uid: string, o: Opts & { generate?: boolean }) => {
      const secret = o.generate ? undefined : await readSecret('the signing secret');
      const res = await new ApiClient(o).api.call('setWebhookSecret', {
        uid,
        body: secret === undefined ? {} : { secret },
      });
      print(o, res, () => describeWithSecret(`Set the secret of ${res.webhook.name}`, res));
    });

  apiOptions(webhooks.command('delete <uid>'))
    .description('Delete a webhook: senders get 404 at once; its delivery log stays readable.')
    .option('--json', 'print JSON')
    .addHelpText('after', '\nExample:\n  npx factoryd webhooks delete 7fK2pQ9xLm3Rt5Vw8Yz1Ab')
    .action(async (uid: string, o: Opts) => {
      await new ApiClient(o).request('DELETE', path(uid));
      print(o, { uid, deleted: true }, () => `Deleted webhook ${uid}.`);
    });

  apiOptions(webhooks.command('deliveries <uid> [id]'))
    .description(
      'The delivery log, newest first; with an entry id, that entry (its payload when Accepted, and the runs it started).',
    )
    .option(
      '--status <status>',
      'accepted | duplicate | rejected_auth | rejected_invalid_json | rejected_too_large | replayed',
    )
    .option('--since <time>', 'received at or after this RFC 3339 time (received_after)')
    .option('--until <time>', 'received before this RFC 3339 time (received_before)')
    .option('--delivery-id <id>', 'the delivery id (identity), exactly')
    .option(
      '--payload-contains <json>',
      'payloads containing this JSON (PostgreSQL @>), e.g. \'{"level":"error"}\'',
    )
    .option('--limit <n>', 'entries per page (1-100)', '20')
    .option('--cursor <cursor>', 'next_cursor of the previous page')
    .option(
      '--follow',
      'keep printing new deliveries as they arrive (Ctrl-C to stop; JSON lines with --json)',
    )
    .option('--interval <seconds>', 'poll interval for --follow', '1')
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      [
        '',
        'Examples:',
        '  npx factoryd webhooks deliveries 7fK2pQ9xLm3Rt5Vw8Yz1Ab --status rejected_auth',
        `  npx factoryd webhooks deliveries 7fK2pQ9xLm3Rt5Vw8Yz1Ab --since 2025-11-21T00:00:00Z --payload-contains '{"level":"error"}'`,
        '  npx factoryd webhooks deliveries 7fK2pQ9xLm3Rt5Vw8Yz1Ab --follow',
        '  npx factoryd webhooks deliveries 7fK2pQ9xLm3Rt5Vw8Yz1Ab 0b9c…   # one entry with its payload and runs',
      ].join('\n'),
    )
    .action(
      async (
        uid: string,
        id: string | undefined,
        o: Opts & DeliverySearch & { limit: string; cursor?: string; follow?: boolean; interval: string },
      ) => {
        const client = new ApiClient(o);
        if (id !== undefined) {
          const entry = await client.api.call('getDelivery', { uid, id });
          print(o, entry, () => describeDelivery(entry));
          return;
        }
        const page = await client.api.call('listDeliveries', {
          uid,
          query: searchParams(o, { limit: o.limit, cursor: o.cursor }),
        });
        if (o.follow) return follow(client, uid, page.deliveries, o);
        print(o, page, () =>
          [
            deliveryTable(page.deliveries),
            page.page_info.has_next_page ? `\nmore: --cursor ${page.page_info.next_cursor}` : '',
          ].join(''),
        );
      },
    );

  apiOptions(webhooks.command('replay <uid> <id>'))
    .description(
      'Replay an Accepted delivery against the automations as they are now: a new Replayed entry, linked to the original, and the runs it starts.',
    )
    .option('--json', 'print JSON')
    .addHelpText('after', '\nExample:\n  npx factoryd webhooks replay 7fK2pQ9xLm3Rt5Vw8Yz1Ab 0b9c…')
    .action(async (uid: string, id: string, o: Opts) => {
      const entry = await new ApiClient(o).api.call('replayDelivery', { uid, id });
      print(o, entry, () =>
        [
          `Replayed entry ${id} as ${entry.id}: ${entry.runs?.length ?? 0} run${entry.runs?.length === 1 ? '' : 's'} started.`,
          '',
          describeDelivery(entry),
        ].join('\n'),
      );
    });

  apiOptions(webhooks.command('test-filter <uid>'))
    .description(
      'Test a trigger filter against a stored Accepted delivery: Would trigger / Would not trigger, with each mismatching path.',
    )
    .option('--automation <name>', 'the filter of this automation of the webhook’s factory')
    .option(
      '--filter <yamlOrJson>',
      'a filter given here: {webhook_ids: [...], payload: {...}, headers: {...}}',
    )
    .option('--filter-file <path>', 'a filter in a YAML or JSON file')
    .option('--delivery <id>', 'the delivery log entry to test (default: the newest Accepted one)')
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      [
        '',
        'Examples:',
        '  npx factoryd webhooks test-filter 7fK2pQ9xLm3Rt5Vw8Yz1Ab --automation triage-issues',
        `  npx factoryd webhooks test-filter 7fK2pQ9xLm3Rt5Vw8Yz1Ab --filter '{payload: {action: [opened]}}'`,
      ].join('\n'),
    )
    .action(
      async (
        uid: string,
        o: Opts & { automation?: string; filter?: string; filterFile?: string; delivery?: string },
      ) => {
        const given = [o.automation, o.filter, o.filterFile].filter((v) => v !== undefined).length;
        if (given !== 1) throw new Error('give exactly one of --automation, --filter, --filter-file');
        const filterText = o.filterFile !== undefined ? readFileSync(o.filterFile, 'utf8') : o.filter;
        const body: WebhookTestFilterRequest = { delivery: o.delivery, automation: o.automation };
        // The service reads the text as it reads automation files (YAML; JSON is YAML too).
        if (filterText !== undefined) body.filter = filterText;
        const res = await new ApiClient(o).api.call('testWebhookFilter', { uid, body });
        print(o, res, () => describeFilterTest(res));
      },
    );
}

/** A factory named by uid or name; none named: the team's only factory. */
async function resolveFactory(client: ApiClient, ref: string | undefined): Promise<FactoryItem> {
  if (ref !== undefined) {
    try {
      return await client.api.call('getFactory', { uid: ref });
    } catch (err) {
      if (!(err instanceof ApiCallFailed) || err.status !== 404) throw err;
    }
  }
  const { factories } = await client.api.call('listFactories', { query: { limit: 100, search: ref } });
  const candidates = ref === undefined ? factories : factories.filter((f) => f.name === ref);
  if (candidates.length === 1) return candidates[0];
  if (ref !== undefined) throw new Error(`no factory named ${ref}; see \`${cliCommand('factories list')}\``);
  if (candidates.length === 0)
    throw new Error(`the team has no factory; add one with \`${cliCommand('factories add')}\``);
  throw new Error(
    `the team has several factories; say which with --factory (${candidates.map((f) => f.name).join(', ')})`,
  );
}

async function follow(
  client: ApiClient,
  uid: string,
  newestFirst: DeliveryItem[],
  o: Opts & DeliverySearch & { interval: string },
) {
  const interval = Math.max(0.2, Number(o.interval)) * 1000;
  const printEntry = (d: DeliveryItem) =>
    process.stdout.write(o.json ? `${JSON.stringify(d)}\n` : `${deliveryRow(d).join('  ')}\n`);
  if (!o.json) process.stdout.write(`${renderTable(DELIVERY_HEADERS, [])}\n`);
  const seen = new Set<string>();
  for (const d of [...newestFirst].reverse()) {
    seen.add(d.id);
    printEntry(d);
  }
  let stopped = false;
  process.once('SIGINT', () => (stopped = true));
  const query = searchParams(o, { limit: '100' });
  while (!stopped) {
    await new Promise((r) => setTimeout(r, interval));
    // The newest page is enough: fewer than 100 deliveries arrive per poll (the rate limit is 60/minute).
    const page = await client.api.call('listDeliveries', { uid, query });
    for (const d of [...page.deliveries].reverse()) {
      if (seen.has(d.id)) continue;
      seen.add(d.id);
      printEntry(d);
    }
  }
}

/** The delivery log's search filters, as options (docs/webhooks.md "Searching the delivery log"). */
interface DeliverySearch {
  status?: string;
  since?: string;
  until?: string;
  deliveryId?: string;
  payloadContains?: string;
}

function searchParams(o: DeliverySearch, base: Record<string, string | undefined>) {
  return {
    ...base,
    status: o.status,
    received_after: o.since,
    received_before: o.until,
    delivery_id: o.deliveryId,
    payload_contains: o.payloadContains,
  };
}

const DELIVERY_HEADERS = ['RECEIVED', 'STATUS', 'DELIVERY ID', 'SIZE', 'FROM', 'ENTRY'];

function deliveryRow(d: DeliveryItem): string[] {
  return [
    d.received_at,
    STATUS_LABELS[d.status] ?? d.status,
    d.delivery_id ?? '-',
    d.size_bytes === null ? '-' : `${d.size_bytes} B`,
    d.client_address ?? '-',
    d.id,
  ];
}

function deliveryTable(list: DeliveryItem[]): string {
  if (list.length === 0) return 'No deliveries.';
  return renderTable(DELIVERY_HEADERS, list.map(deliveryRow));
}

function describeDelivery(d: DeliveryDetail): string {
  const lines = [
    `Entry      ${d.id}`,
    `Status     ${STATUS_LABELS[d.status] ?? d.status}`,
    `Delivery   ${d.delivery_id ?? '-'}`,
    `Received   ${d.received_at} from ${d.client_address ?? '-'}`,
    `Size       ${d.size_bytes} bytes`,
  ];
  if (d.replay_of) lines.push(`Replay of  ${d.replay_of}`);
  if (d.replayed_as?.length) lines.push(`Replayed   ${d.replayed_as.join(', ')}`);
  if (d.runs?.length) {
    lines.push(
      '',
      'Runs started:',
      renderTable(
        ['RUN', 'STATE'],
        d.runs.map((r) => [r.run_id, r.state]),
      ),
    );
  }
  if (d.payload !== undefined) lines.push('', 'Payload:', JSON.stringify(d.payload, null, 2));
  return lines.join('\n');
}

function authLabel(w: WebhookSummary): string {
  return w.signature_scheme ? `${w.auth_mode}/${w.signature_scheme}` : w.auth_mode;
}

/** `factory` is its name when the caller knows it (the API's webhook carries the factory's UID). */
function describeWebhook(w: WebhookItem, factory?: string): string {
  const rows: Array<[string, string | undefined]> = [
    ['UID', w.uid],
    ['Name', w.name],
    ['Factory', factory ? `${factory} (${w.factory_uid})` : w.factory_uid],
    ['Auth', authLabel(w)],
    ['Secret', `${w.secret_name} (team secret; its value is never shown again)`],
    ['Delivery id', w.delivery_id_header],
    [
      'Enabled',
      w.deleted ? 'deleted' : w.enabled ? 'yes' : w.awaiting_secret ? 'no (awaiting its secret)' : 'no',
    ],
    ['URL', w.ingress_url],
    ['Created', w.created_at],
    ['About', w.description],
  ];
  return rows
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${k.padEnd(12)}${v}`)
    .join('\n');
}

/** The webhook, and a secret shown now and never again (with how a sender uses it). */
function describeWithSecret(headline: string, res: WebhookWithSecret, factory?: string): string {
  const w = res.webhook;
  const lines = [`${headline} (${w.uid}).`, '', describeWebhook(w, factory)];
  if (res.secret !== undefined) {
    lines.push('', 'Secret (shown only this once; store it in the sender now):', '', `  ${res.secret}`, '');
    if (w.auth_mode === 'url_token')
      lines.push(`Senders POST to ${w.ingress_url.replace('{token}', res.secret)}`);
    else if (w.auth_mode === 'token')
      lines.push(`Senders POST to ${w.ingress_url} with the header "Authorization: Bearer <secret>".`);
    else lines.push(`Give the sender this signing secret and the URL ${w.ingress_url}.`);
  } else if (w.awaiting_secret) {
    lines.push('', `Disabled until its signing secret is set: ${cliCommand(`webhooks set-secret ${w.uid}`)}`);
  }
  // Both, ready for this shell (the README's walkthrough uses $HOOK and $SECRET).
  lines.push(
    '',
    'For this shell:',
    '',
    `  export HOOK=${w.uid}${res.secret !== undefined ? ` SECRET=${shellWord(res.secret)}` : ''}`,
  );
  return lines.join('\n');
}

/** A value as one shell word: as it is when it holds only safe characters, else single-quoted. */
function shellWord(value: string): string {
  return /^[A-Za-z0-9_.,:/+=@%-]+$/.test(value) ? value : `'${value.replace(/'/g, `'\\''`)}'`;
}

function describeFilterTest(t: WebhookTestFilterResponse): string {
  const mark = (passed: boolean) => (passed ? 'pass' : 'FAIL');
  const lines = [
    t.result === 'would_trigger' ? 'Would trigger' : 'Would not trigger',
    '',
    `Delivery       ${t.delivery.id} (${t.delivery.delivery_id ?? '-'}, ${t.delivery.received_at})`,
    ...(t.automation ? [`Automation     ${t.automation}`] : []),
    `Webhook check  ${mark(t.webhook_check.passed)}  ${t.webhook_check.message}`,
    `Payload check  ${mark(t.payload_check.passed)}  ${t.payload_check.message}`,
    ...(t.header_check ? [`Header check   ${mark(t.header_check.passed)}  ${t.header_check.message}`] : []),
  ];
  if (t.payload_check.mismatches.length) {
    lines.push(
      '',
      renderTable(
        ['PATH', 'CONDITION', 'EXPECTED', 'ACTUAL'],
        t.payload_check.mismatches.map((m) => [
          m.path,
          m.condition,
          JSON.stringify(m.expected),
          m.present ? JSON.stringify(m.actual) : '(missing)',
        ]),
      ),
    );
  }
  if (t.header_check?.headers.length) {
    lines.push(
      '',
      renderTable(
        ['HEADER', 'OUTCOME', 'CONDITION', 'EXPECTED', 'ACTUAL'],
        t.header_check.headers.map((h) => [
          h.path,
          h.passed ? 'pass' : 'FAIL',
          h.mismatches.map((m) => m.condition).join(', ') || '-',
          h.mismatches.map((m) => JSON.stringify(m.expected)).join(', ') || '-',
          h.actual !== undefined ? JSON.stringify(h.actual) : '(missing)',
        ]),
      ),
    );
  }
  return lines.join('\n');
}
