import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { ApiClient, apiOptions, type ApiOptions } from '../api-client.js';
import { print, renderTable } from '../output.js';
import { readStdin } from '../stdin.js';
import { humanDuration } from '../../common/durations.js';
import { TERMINAL_RUN_STATE_VALUES, type RunCreateRequest, type RunItem } from '../../contract/generated.js';

type Opts = ApiOptions & { json?: boolean };
const TERMINAL: ReadonlySet<string> = new Set(TERMINAL_RUN_STATE_VALUES);

/** `factoryd runs …`: the Run API from a shell. */
export function registerRunsCommands(program: Command): void {
  const runs = program
    .command('runs')
    .description('Start, list, inspect, continue, cancel and follow agent runs (over the API).')
    .addHelpText(
      'after',
      '\nExample:\n  FACTORYD_API_KEY=fdk_… npx factoryd runs create --prompt "Fix the flaky test" --watch',
    );

  apiOptions(runs.command('create'))
    .description('Start a run; prints its id.')
    .option('--prompt <text>', 'the prompt (or --prompt-file, or stdin)')
    .option('--prompt-file <path>', 'read the prompt from a file')
    .option('--title <title>', 'a title (default: the prompt’s first line)')
    .option('--skill <spec>', 'start from a skill: owner/repo:name')
    .option('--config <json>', 'AmbientAgentConfig as JSON, e.g. {"model_id":"…","worker_host":"my-box"}')
    .option('--metadata <key=value...>', 'labels (repeatable)')
    .option('--watch', 'then follow it until it ends, like `runs watch` (the default on a terminal)')
    .option('--no-watch', 'print its id and return (the default when stdout is not a terminal)')
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      '\nA run needs a prompt (--prompt, --prompt-file or stdin) or a skill (--skill).\n' +
        '\nExamples:\n  npx factoryd runs create --prompt "Fix the flaky test in ci/" --metadata pipeline=1234\n' +
        '  git diff | npx factoryd runs create --title "Review this diff" --watch\n' +
        '  RUN=$(npx factoryd runs create --prompt "Fix it" --json | jq -r .run_id)   # in a script: no watch',
    )
    .action(
      async (
        o: Opts & {
          prompt?: string;
          promptFile?: string;
          title?: string;
          skill?: string;
          config?: string;
          metadata?: string[];
          watch?: boolean;
        },
      ) => {
        const prompt =
          o.prompt ??
          (o.promptFile
            ? readFileSync(o.promptFile, 'utf8')
            : o.skill || process.stdin.isTTY
              ? undefined
              : await readStdin('the prompt (or give --prompt)'));
        // What the API would refuse with a 400, said before anything is sent.
        if (!prompt?.trim() && !o.skill)
          throw new Error(
            'a run needs a prompt or a skill: --prompt TEXT, --prompt-file PATH, the prompt on stdin, or --skill OWNER/REPO:NAME',
          );
        const client = new ApiClient(o);
        const body: RunCreateRequest = { prompt, title: o.title, skill: o.skill };
        // The service validates --config (400 naming the bad field).
        if (o.config) body.config = parseJson(o.config, '--config') as RunCreateRequest['config'];
        if (o.metadata) body.metadata = Object.fromEntries(o.metadata.map((kv) => splitPair(kv)));
        const created = await client.api.call('createRun', { body });
        // On a terminal a person wants to see the run go; a script wants the id and its shell back.
        if (o.watch ?? (process.stdout.isTTY === true && !o.json)) return watch(client, created.run_id, o);
        print(o, created, () => `Started run ${created.run_id} (${created.state}).`);
      },
    );

  apiOptions(runs.command('list'))
    .description('List runs, newest first.')
    .option('--state <state...>', 'only these states (repeatable)')
    .option('--source <source>', 'API, CLI, WEBHOOK, FACTORY, …')
    .option('--name <name>', 'config name')
    .option('--q <text>', 'search title, prompt and skill')
    .option('--limit <n>', 'page size (1-500)', '20')
    .option('--cursor <cursor>', 'next_cursor of the previous page')
    .option('--json', 'print JSON')
    .addHelpText('after', '\nExample:\n  npx factoryd runs list --state QUEUED --state INPROGRESS --limit 50')
    .action(
      async (
        o: Opts & {
          state?: string[];
          source?: string;
          name?: string;
          q?: string;
          limit: string;
          cursor?: string;
        },
      ) => {
        const page = await new ApiClient(o).api.call('listRuns', {
          query: { state: o.state, source: o.source, name: o.name, q: o.q, limit: o.limit, cursor: o.cursor },
        });
        print(o, page, () =>
          [
            renderTable(
              ['RUN', 'STATE', 'SOURCE', 'UPDATED', 'TITLE'],
              page.runs.map((r) => [r.run_id, r.state, r.source, r.updated_at, truncate(r.title, 60)]),
            ),
            page.page_info.has_next_page ? `\nmore: --cursor ${page.page_info.next_cursor}` : '',
          ].join(''),
        );
      },
    );

  apiOptions(runs.command('show <runId>'))
    .description('Show one run: state, source, times, status message, session link and prompt.')
    .option('--json', 'print JSON')
    .addHelpText('after', '\nExample:\n  npx factoryd runs show 6f1c2d3e-… --json')
    .action(async (runId: string, o: Opts) => {
      const run = await new ApiClient(o).api.call('getRun', { runId });
      print(o, run, () => describe(run));
    });

  apiOptions(runs.command('followup <runId> [message]'))
    .description('Send a follow-up (message or stdin); an ended run continues in the same conversation.')
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      '\nExamples:\n  npx factoryd runs followup 6f1c2d3e-… "Also update the changelog"\n  cat review.md | npx factoryd runs followup 6f1c2d3e-…',
    )
    .action(async (runId: string, message: string | undefined, o: Opts) => {
      const text = message ?? (await readStdin('the message (or give it as an argument)'));
      await new ApiClient(o).api.call('followupRun', { runId, body: { message: text } });
      print(o, { run_id: runId, sent: true }, () => `Sent a follow-up to ${runId}.`);
    });

  apiOptions(runs.command('cancel <runId>'))
    .description('Cancel a queued or running run (its agent process is stopped).')
    .option('--json', 'print JSON')
    .addHelpText('after', '\nExample:\n  npx factoryd runs cancel 6f1c2d3e-…')
    .action(async (runId: string, o: Opts) => {
      const id = await new ApiClient(o).api.call('cancelRun', { runId });
      print(o, { run_id: id, state: 'CANCELLED' }, () => `Cancelled run ${id}.`);
    });

  apiOptions(runs.command('watch <runId>'))
    .description(
      'Follow a run until it ends, with a live progress line; exit 0 when it SUCCEEDED, 1 otherwise.',
    )
    .option('--interval <seconds>', 'poll interval', '1')
    .option('--json', 'print the final run as JSON')
    .addHelpText('after', '\nExample:\n  npx factoryd runs watch 6f1c…')
    .action((runId: string, o: Opts & { interval?: string }) => watch(new ApiClient(o), runId, o));
}

async function watch(client: ApiClient, runId: string, o: Opts & { interval?: string }): Promise<void> {
  const interval = Math.max(0.2, Number(o.interval ?? 1)) * 1000;
  const live = process.stderr.isTTY && !o.json;
  let last = '';
  for (;;) {
    const run = await client.api.call('getRun', { runId });
    const line = `${run.run_id}  ${run.state}${run.run_time ? `  ${humanDuration(run.run_time)}` : ''}${run.status_message ? `  ${run.status_message.message}` : ''}`;
    if (line !== last) {
      // A progress line on the terminal; one line per change when piped.
      process.stderr.write(live ? `\r\x1b[2K${line}` : `${line}\n`);
      last = line;
    }
    if (TERMINAL.has(run.state)) {
      if (live) process.stderr.write('\n');
      print(o, run, () => describe(run));
      process.exitCode = run.state === 'SUCCEEDED' ? 0 : 1;
      return;
    }
    await new Promise((r) => setTimeout(r, interval));
  }
}

function describe(r: RunItem): string {
  const rows: Array<[string, string | undefined]> = [
    ['Run', r.run_id],
    ['Title', r.title],
    ['State', r.state],
    ['Source', r.source],
    ['Created', r.created_at],
    ['Updated', r.updated_at],
    ['Run time', r.run_time && humanDuration(r.run_time)],
    ['Status', r.status_message?.message],
    ['Session', r.session_link],
  ];
  return (
    rows
      .filter(([, v]) => v !== undefined)
      .map(([k, v]) => `${k.padEnd(9)} ${v}`)
      .join('\n') + `\n\n${r.prompt}`
  );
}

function truncate(s: string, n: number): string {
  return s.length > n ? `${s.slice(0, n - 1)}…` : s;
}

function splitPair(kv: string): [string, string] {
  const i = kv.indexOf('=');
  if (i <= 0) throw new Error(`--metadata wants key=value, got "${kv}"`);
  return [kv.slice(0, i), kv.slice(i + 1)];
}

function parseJson(text: string, flag: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new Error(`${flag} is not valid JSON`);
  }
}
