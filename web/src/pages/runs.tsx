import { useState } from 'preact/hooks';
import { can, query, useAction, useFeed, useLive, wire } from '../api';
import { BASE, Link, navigate } from '../router';
import { Badge, Dialog, Empty, ErrorBox, Loading, Time } from '../ui';
import { RUN_STATE_VALUES, type RunCreateRequest } from '../../../src/contract/generated';

const SOURCES = ['API', 'CLI', 'WEBHOOK', 'FACTORY', 'SCHEDULED_AGENT'];
const TEXT_FILTERS: Array<[string, string, string]> = [
  ['name', 'Agent name', 'e.g. triage'],
  ['model_id', 'Model', 'e.g. claude-sonnet'],
  ['creator', 'Creator', 'principal uid'],
];

/** The filters behind "More filters" (opened when one is set). */
const MORE = ['name', 'model_id', 'creator', 'created_after', 'created_before', 'metadata'];

interface Filters {
  [k: string]: string | string[] | undefined;
  state?: string[];
}

/** Filters live in the page's own query string (they hold no secret), so a filtered view is a link. */
function readFilters(): Filters {
  const q = new URLSearchParams(location.search);
  const f: Filters = {};
  for (const [k, v] of q) {
    if (k === 'state') f.state = [...(f.state ?? []), v];
    else f[k] = v;
  }
  return f;
}

/** A page of the run list with the page's filters. */
const apiQuery = (f: Filters, cursor?: string) => ({ limit: '25', cursor, ...filterParams(f) });

/**
 * The team's stream of run changes with the page's filters, but for `q`, which the stream does not
 * apply (it answers 400), and `state`: on the stream `state` is the state a change entered, so a list
 * of INPROGRESS runs would hear nothing when a run leaves INPROGRESS and keep its stale row. Without
 * them the page reloads on changes to more runs than it shows, never fewer; the reload applies them.
 */
function streamQuery(f: Filters): string {
  const { q: _search, state: _entered, ...params } = filterParams(f);
  return query(params);
}

/**
 * The page's filters as the API's query parameters. `metadata` typed as `key=value, key2=value2`
 * becomes metadata[key]=value pairs (≤ 5, AND).
 */
function filterParams(f: Filters): Record<string, string | string[] | undefined> {
  const params: Record<string, string | string[] | undefined> = {};
  for (const [k, v] of Object.entries(f)) {
    if (k === 'metadata' && typeof v === 'string') {
      for (const pair of v.split(',')) {
        const i = pair.indexOf('=');
        if (i > 0) params[`metadata[${pair.slice(0, i).trim()}]`] = pair.slice(i + 1).trim();
      }
    } else if ((k === 'created_after' || k === 'created_before') && typeof v === 'string' && v) {
      params[k] = new Date(v).toISOString();
    } else params[k] = v;
  }
  return params;
}

export function RunsPage() {
  const [filters, setFilters] = useState<Filters>(readFilters);
  const [cursors, setCursors] = useState<string[]>([]);
  const [creating, setCreating] = useState(false);
  const cursor = cursors[cursors.length - 1];
  const key = JSON.stringify(filters) + (cursor ?? '');
  // The team's stream of run changes says when to reload the page; should it fail, the page polls.
  const feedOpen = useFeed(`/agent/runs/events${streamQuery(filters)}`, () => runs.reload());
  const runs = useLive(
    () => wire.call('listRuns', { query: apiQuery(filters, cursor) }),
    [key],
    feedOpen ? 30000 : 3000,
  );
  const apply = (next: Filters) => {
    setFilters(next);
    setCursors([]);
    const q = query(next);
    history.replaceState(null, '', `${BASE}/runs${q}`);
  };
  const set = (k: string, v: string) => apply({ ...filters, [k]: v || undefined });
  const toggleState = (s: string) => {
    const now = filters.state ?? [];
    apply({ ...filters, state: now.includes(s) ? now.filter((x) => x !== s) : [...now, s] });
  };
  const filtered = Object.values(filters).some((v) => (Array.isArray(v) ? v.length : v));
  return (
    <section>
      <div class="pagehead">
        <h1>Runs</h1>
        {can('runs:write') && (
          <button type="button" class="primary" onClick={() => setCreating(true)}>
            New run
          </button>
        )}
      </div>
      <form class="filters" onSubmit={(e) => e.preventDefault()} aria-label="Filters">
        <div class="chips" role="group" aria-label="State">
          {RUN_STATE_VALUES.map((s) => (
            <button
              type="button"
              key={s}
              class={`chip ${filters.state?.includes(s) ? 'on' : ''}`}
              aria-pressed={filters.state?.includes(s) ?? false}
              onClick={() => toggleState(s)}
            >
              {s}
            </button>
          ))}
        </div>
        <div class="filter-grid">
          <label>
            Search
            <input
              type="search"
              name="q"
              placeholder="title or prompt"
              value={(filters.q as string) ?? ''}
              onChange={(e) => set('q', e.currentTarget.value)}
            />
          </label>
          <label>
            Source
            <select
              value={(filters.source as string) ?? ''}
              onChange={(e) => set('source', e.currentTarget.value)}
            >
              <option value="">Any</option>
              {SOURCES.map((s) => (
                <option key={s}>{s}</option>
              ))}
            </select>
          </label>
        </div>
        <details class="more" open={MORE.some((k) => filters[k])}>
          <summary>More filters</summary>
          <div class="filter-grid">
            {TEXT_FILTERS.map(([k, label, hint]) => (
              <label key={k}>
                {label}
                <input
                  type="search"
                  name={k}
                  placeholder={hint}
                  value={(filters[k] as string) ?? ''}
                  onChange={(e) => set(k, e.currentTarget.value)}
                />
              </label>
            ))}
            <label>
              Created after
              <input
                type="datetime-local"
                value={(filters.created_after as string) ?? ''}
                onChange={(e) => set('created_after', e.currentTarget.value)}
              />
            </label>
            <label>
              Created before
              <input
                type="datetime-local"
                value={(filters.created_before as string) ?? ''}
                onChange={(e) => set('created_before', e.currentTarget.value)}
              />
            </label>
            <label>
              Metadata
              <input
                type="search"
                placeholder="key=value, key2=value2"
                value={(filters.metadata as string) ?? ''}
                onChange={(e) => set('metadata', e.currentTarget.value)}
              />
            </label>
          </div>
        </details>
        {filtered && (
          <button type="button" class="ghost" onClick={() => apply({})}>
            Clear filters
          </button>
        )}
      </form>
      <ErrorBox error={runs.error} />
      {runs.loading && !runs.data ? (
        <Loading what="Loading runs" />
      ) : runs.data && runs.data.runs.length === 0 ? (
        <Empty title={filtered ? 'No run matches these filters' : 'No runs yet'}>
          {filtered
            ? 'Loosen a filter, or clear them all.'
            : can('runs:write')
              ? 'Start one with “New run”, from the CLI (npx factoryd runs create), or let a webhook start one.'
              : 'Runs started by the API, the CLI, factories or webhooks show up here.'}
        </Empty>
      ) : (
        runs.data && (
          <>
            <div class="tablewrap">
              <table class="list" aria-label="Runs">
                <thead>
                  <tr>
                    <th>Run</th>
                    <th>State</th>
                    <th class="hide-s">Source</th>
                    <th class="hide-s">Agent / model</th>
                    <th class="hide-s">Creator</th>
                    <th>Updated</th>
                  </tr>
                </thead>
                <tbody>
                  {runs.data.runs.map((r) => (
                    <tr key={r.run_id}>
                      <td>
                        <Link href={`${BASE}/runs/${r.run_id}`} class="rowlink">
                          {r.title || r.run_id}
                        </Link>
                        <div class="muted mono small-text">{r.run_id}</div>
                      </td>
                      <td>
                        <Badge value={r.state} />
                      </td>
                      <td class="hide-s">{r.source ?? '—'}</td>
                      <td class="hide-s">
                        {String(r.agent_config?.name ?? '—')}
                        <div class="muted small-text">{String(r.agent_config?.model_id ?? '')}</div>
                      </td>
                      <td class="hide-s">{r.creator?.display_name ?? '—'}</td>
                      <td>
                        <Time iso={r.updated_at} />
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
            <div class="pager">
              <button
                type="button"
                disabled={!cursors.length}
                onClick={() => setCursors(cursors.slice(0, -1))}
              >
                ← Newer
              </button>
              <span class="muted">Page {cursors.length + 1}</span>
              <button
                type="button"
                disabled={!runs.data.page_info.has_next_page}
                onClick={() => setCursors([...cursors, runs.data!.page_info.next_cursor!])}
              >
                Older →
              </button>
            </div>
          </>
        )
      )}
      {creating && <NewRun onClose={() => setCreating(false)} />}
    </section>
  );
}

function NewRun({ onClose }: { onClose: () => void }) {
  const [prompt, setPrompt] = useState('');
  const [title, setTitle] = useState('');
  const [config, setConfig] = useState('');
  const start = useAction(async () => {
    let parsed: unknown;
    if (config.trim()) {
      try {
        parsed = JSON.parse(config);
      } catch (e) {
        throw new Error(`Config is not JSON: ${(e as Error).message}`, { cause: e });
      }
    }
    return wire.call('createRun', {
      body: {
        prompt,
        ...(title ? { title } : {}),
        // The service validates the config (400 naming the bad field).
        ...(parsed !== undefined ? { config: parsed as RunCreateRequest['config'] } : {}),
      },
    });
  });
  return (
    <Dialog title="New run" onClose={onClose}>
      <form
        onSubmit={async (e) => {
          e.preventDefault();
          const out = await start.run();
          if (out) navigate(`${BASE}/runs/${out.run_id}`);
        }}
      >
        <label>
          Prompt
          <textarea
            name="prompt"
            autoFocus
            rows={6}
            required
            value={prompt}
            onInput={(e) => setPrompt(e.currentTarget.value)}
          />
        </label>
        <label>
          Title <span class="muted">(optional; default: the prompt’s first line)</span>
          <input name="title" value={title} onInput={(e) => setTitle(e.currentTarget.value)} />
        </label>
        <label>
          Config{' '}
          <span class="muted">(optional JSON: name, model_id, skill_spec, worker_host, mcp_servers, …)</span>
          <textarea
            name="config"
            rows={4}
            class="mono"
            placeholder={'{ "model_id": "…", "worker_host": "warp" }'}
            value={config}
            onInput={(e) => setConfig(e.currentTarget.value)}
          />
        </label>
        <ErrorBox error={start.error} title="The run was not started" />
        <div class="actions">
          <button type="submit" class="primary" disabled={start.pending}>
            {start.pending ? 'Starting…' : 'Start run'}
          </button>
        </div>
      </form>
    </Dialog>
  );
}
