import { useState } from 'preact/hooks';
import { api, can, useAction, useFeed, useLive, wire } from '../api';
import { BASE, Link } from '../router';
import { humanDuration } from '../../../src/common/durations';
import { Badge, CopyField, Dialog, Empty, ErrorBox, Json, Loading, Time } from '../ui';
import {
  TERMINAL_RUN_STATE_VALUES,
  type ArtifactItem,
  type ConversationMessage,
  type RunItem,
} from '../../../src/contract/generated';

const TERMINAL: readonly string[] = TERMINAL_RUN_STATE_VALUES;

export function RunPage({ id }: { id: string }) {
  const path = `/agent/runs/${encodeURIComponent(id)}`;
  const [ended, setEnded] = useState(false);
  // While the run is live its event stream says when to reload; polling is the net under it (and
  // the pace when the stream cannot be opened). An ended run changes no more: no stream, no poll.
  const feedOpen = useFeed(ended ? undefined : `${path}/events`, () => {
    run.reload();
    conversation.reload();
  });
  const every = ended ? 0 : feedOpen ? 30000 : 2000;
  const run = useLive(() => wire.call('getRun', { runId: id }), [id], every);
  const live = run.data ? !TERMINAL.includes(run.data.state) : true;
  if (!live !== ended) setEnded(!live);
  // When the run ends, `every` turning 0 fetches the conversation one last time.
  const conversation = useLive(() => wire.call('getRunConversation', { runId: id }), [id], every);
  const cancel = useAction(() => wire.call('cancelRun', { runId: id }));
  const [confirmCancel, setConfirmCancel] = useState(false);
  const interrupt = useAction(() => api.post(`/agent/runs/${encodeURIComponent(id)}/interrupt`));
  if (run.error && !run.data)
    return (
      <section>
        <p>
          <Link href={`${BASE}/runs`}>← Runs</Link>
        </p>
        <ErrorBox error={run.error} />
      </section>
    );
  if (!run.data) return <Loading what="Loading the run" />;
  const r = run.data;
  const config = r.agent_config ?? {};
  return (
    <section>
      <p class="crumbs">
        <Link href={`${BASE}/runs`}>← Runs</Link>
      </p>
      <div class="pagehead">
        <h1 class="wrap">{r.title || r.run_id}</h1>
        <Badge value={r.state} />
        {can('runs:write') && r.is_run_type_cancellable && (
          <button
            type="button"
            class="danger"
            disabled={cancel.pending}
            onClick={() => setConfirmCancel(true)}
          >
            Cancel run
          </button>
        )}
        {can('runs:write') && r.state === 'INPROGRESS' && (
          <button
            type="button"
            title="Stop the agent's current turn; the run waits for a follow-up"
            disabled={interrupt.pending}
            onClick={async () => {
              await interrupt.run();
              run.reload();
            }}
          >
            Interrupt
          </button>
        )}
      </div>
      {confirmCancel && (
        <Dialog title="Cancel this run?" onClose={() => setConfirmCancel(false)}>
          <ul class="consequences">
            <li>The agent is stopped now (its process gets SIGTERM, then SIGKILL).</li>
            <li>The run ends CANCELLED; its conversation and artifacts so far are kept.</li>
            <li>A follow-up can still continue it later, in the same conversation.</li>
          </ul>
          <ErrorBox error={cancel.error} title="Not cancelled" />
          <div class="actions">
            <button type="button" onClick={() => setConfirmCancel(false)}>
              Keep it running
            </button>
            <button
              type="button"
              class="danger"
              disabled={cancel.pending}
              onClick={async () => {
                if ((await cancel.run()) !== undefined) setConfirmCancel(false);
                run.reload();
              }}
            >
              {cancel.pending ? 'Cancelling…' : 'Cancel run'}
            </button>
          </div>
        </Dialog>
      )}
      <ErrorBox error={confirmCancel ? undefined : cancel.error} title="Cancel failed" />
      <ErrorBox error={interrupt.error} title="Interrupt failed" />
      <ErrorBox error={run.error} />
      {r.status_message && (
        <p class={`status ${r.state === 'SUCCEEDED' ? 'ok' : TERMINAL.includes(r.state) ? 'bad' : ''}`}>
          {r.status_message.message}
          {/* factoryd's own reason names the end more finely than the clients' error_code. */}
          {r.status_message.reason || r.status_message.error_code
            ? ` (${r.status_message.reason ?? r.status_message.error_code})`
            : ''}
        </p>
      )}
      <div class="grid2">
        <div>
          <dl class="meta">
            <dt>Run ID</dt>
            <dd class="mono">{r.run_id}</dd>
            <dt>Source</dt>
            <dd>{r.source ?? '—'}</dd>
            <dt>Creator</dt>
            <dd>{r.creator ? `${r.creator.display_name} (${r.creator.type})` : '—'}</dd>
            <dt>Created</dt>
            <dd>
              <Time iso={r.created_at} />
            </dd>
            <dt>Started</dt>
            <dd>
              <Time iso={r.started_at} />
            </dd>
            <dt>Run time</dt>
            <dd title={r.run_time}>{r.run_time ? humanDuration(r.run_time) : '—'}</dd>
            <dt>Runs on</dt>
            <dd>
              {/* execution_location is always REMOTE: worker_host tells a self-hosted worker (RunItem). */}
              {config.worker_host ? `self-hosted: ${String(config.worker_host)}` : 'service-hosted workers'}
            </dd>
            {r.environment && (
              <>
                <dt>Environment</dt>
                <dd data-testid="environment">
                  {String(r.environment.name)}
                  {environmentCommits(r.environment)}
                </dd>
              </>
            )}
            {r.parent_run_id && (
              <>
                <dt>Parent</dt>
                <dd>
                  <Link href={`${BASE}/runs/${r.parent_run_id}`}>{r.parent_run_id}</Link>
                </dd>
              </>
            )}
            {r.metadata &&
              Object.entries(r.metadata as Record<string, string>).map(([k, v]) => {
                // Only the service writes a webhook-started run's metadata; a caller's is text.
                const href =
                  r.source === 'WEBHOOK'
                    ? metadataLink(k, v, r.metadata as Record<string, string>)
                    : undefined;
                return (
                  <>
                    <dt key={k}>meta: {k}</dt>
                    <dd class={href ? 'mono' : undefined}>{href ? <Link href={href}>{v}</Link> : v}</dd>
                  </>
                );
              })}
          </dl>
          {r.session_link && <CopyField label="Link to this run" value={r.session_link} />}
        </div>
        <div>
          <h2>Prompt</h2>
          <pre class="text" data-testid="prompt">
            {r.prompt}
          </pre>
          <details>
            <summary>Resolved config</summary>
            <Json value={config} label="Resolved config" />
          </details>
          {r.environment && (
            <details>
              <summary>Environment, as resolved</summary>
              <Json value={r.environment} label="Environment, as resolved" />
            </details>
          )}
        </div>
      </div>
      <h2>Conversation {live && <span class="pulse" aria-label="live" />}</h2>
      <ErrorBox error={conversation.error} />
      <Conversation items={conversation.data?.messages} />
      {Array.isArray(r.artifacts) && r.artifacts.length > 0 && (
        <>
          <h2>Artifacts</h2>
          {(r.artifacts as ArtifactEntry[]).map((a, i) => (
            <ArtifactView key={a.data?.artifact_uid ?? i} entry={a} open={i === 0} />
          ))}
        </>
      )}
      <Usage runId={r.run_id} usage={r.request_usage} every={every} />
      <Transcript path={path} />
      {can('runs:write') && <FollowUp id={id} state={r.state} onSent={run.reload} />}
    </section>
  );
}

/**
 * Where a webhook-started run's metadata (which the service wrote) leads: its webhook, the delivery
 * log entry that started it (the webhook page with that entry selected), its factory.
 */
function metadataLink(key: string, value: string, metadata: Record<string, string>): string | undefined {
  const hook = encodeURIComponent(metadata.webhook_uid ?? '');
  const entry = (id: string | undefined) =>
    hook && id ? `${BASE}/webhooks/${hook}?delivery=${encodeURIComponent(id)}` : undefined;
  switch (key) {
    case 'webhook_uid':
      return `${BASE}/webhooks/${hook}`;
    case 'factory_uid':
      return `${BASE}/factories/${encodeURIComponent(value)}`;
    case 'webhook_delivery_entry':
    case 'webhook_replay_of':
      return entry(value);
    case 'webhook_delivery_id':
      return entry(metadata.webhook_delivery_entry);
  }
  return undefined;
}

type RequestUsage = NonNullable<RunItem['request_usage']>;

/**
 * The tokens the run's harness reported per model (the run's `request_usage`); for Claude Code and
 * Codex runs, split into the CLI's own categories (`…/harness-usage`).
 */
function Usage({ runId, usage, every }: { runId: string; usage?: RequestUsage; every: number }) {
  const detail = useLive(
    () => (usage ? wire.call('getRunHarnessUsage', { runId }) : Promise.resolve(undefined)),
    [runId, usage?.total_tokens],
    every,
  );
  if (!usage) return null;
  const split = (detail.data?.available && detail.data.usage?.snapshot.payload.attribution) || undefined;
  const categories = split ? [...new Set(split.flatMap((a) => Object.keys(a.usage ?? {})))] : [];
  const n = (v: number | null | undefined) => (v === null || v === undefined ? '—' : v.toLocaleString('en'));
  return (
    <>
      <h2>Token usage</h2>
      <div class="tablewrap">
        <table class="list" aria-label="Token usage">
          <thead>
            <tr>
              <th>Model</th>
              {categories.map((c) => (
                <th key={c}>{c.replace(/_/g, ' ')}</th>
              ))}
              <th>Total tokens</th>
            </tr>
          </thead>
          <tbody>
            {usage.model_token_usage.map((m) => (
              <tr key={m.model_id}>
                <td class="mono">{m.model_id}</td>
                {categories.map((c) => (
                  <td key={c}>{n(split?.find((a) => a.model === m.model_id)?.usage?.[c])}</td>
                ))}
                <td>{n(m.total_tokens)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <ErrorBox error={detail.error} />
    </>
  );
}

/** The harness's raw output (every line it printed that was no protocol event), fetched when opened. */
function Transcript({ path }: { path: string }) {
  const [open, setOpen] = useState(false);
  // The API answers with a redirect to the transcript's signed link, which fetch follows.
  const text = useLive(
    () => (open ? api.text(`${path}/transcript`) : Promise.resolve(undefined)),
    [path, open],
  );
  return (
    <details class="transcript" onToggle={(e) => setOpen((e.currentTarget as HTMLDetailsElement).open)}>
      <summary>Raw transcript</summary>
      <ErrorBox error={text.error} />
      {open && text.data === undefined && !text.error && <Loading what="Loading the transcript" />}
      {open && text.data !== undefined && (
        <pre class="text" data-testid="transcript">
          {text.data || '(nothing printed yet)'}
        </pre>
      )}
    </details>
  );
}

/** `path@commit` of each repository the run's environment checked out (how to reproduce it). */
function environmentCommits(env: NonNullable<RunItem['environment']>): string {
  const at = (env.repositories ?? []).map((r) => `${r.path}@${r.commit ? r.commit.slice(0, 12) : '?'}`);
  return at.length ? ` (${at.join(', ')})` : '';
}

type ArtifactEntry = ArtifactItem;

/** Text this size or smaller is shown on the page; larger, or not text, is a download link. */
const MAX_SHOWN_TEXT = 256 * 1024;

/**
 * One artifact: its content where a person can read it on the page (a plan's or a text file's text,
 * a screenshot), else its download link; fetched when opened, through the API (a plan) or the
 * artifact's signed link (a file or screenshot).
 */
function ArtifactView({ entry, open }: { entry: ArtifactEntry; open: boolean }) {
  const [shown, setShown] = useState(open);
  const d = entry.data ?? {};
  const uid = d.artifact_uid;
  const title = String(d.filepath ?? d.title ?? d.filename ?? d.url ?? entry.artifact_type);
  const detail = useLive(async () => {
    if (!shown || !uid) return undefined;
    const a = await wire.call('getArtifact', { artifactUid: uid });
    const type = String(a.data.content_type ?? '');
    const link = typeof a.data.download_url === 'string' ? a.data.download_url : undefined;
    if (typeof a.data.content === 'string') return { text: a.data.content, link, type };
    const size = Number(a.data.size_bytes ?? 0);
    if (link && /^text\/|^application\/json/.test(type) && size <= MAX_SHOWN_TEXT) {
      const res = await fetch(link, { credentials: 'omit', cache: 'no-store' });
      if (res.ok) return { text: await res.text(), link, type };
    }
    return { link, type };
  }, [uid, shown]);
  const v = detail.data;
  return (
    <details
      class="artifact"
      open={open}
      onToggle={(e) => setShown((e.currentTarget as HTMLDetailsElement).open)}
    >
      <summary>
        {entry.artifact_type.toLowerCase().replace('_', ' ')}: {title}
      </summary>
      <ErrorBox error={detail.error} />
      {uid && shown && !v && !detail.error && <Loading what="Loading the artifact" />}
      {v?.text !== undefined && <pre class="text">{v.text}</pre>}
      {v?.link && v.type.startsWith('image/') && <img class="artifact-image" src={v.link} alt={title} />}
      {v?.link && (
        <p>
          <a href={v.link} download>
            Download
          </a>
        </p>
      )}
      {(!uid || entry.artifact_type === 'PULL_REQUEST' || entry.artifact_type === 'EXTERNAL_REFERENCE') && (
        <Json value={d} />
      )}
    </details>
  );
}

function Conversation({ items }: { items?: ConversationMessage[] }) {
  if (!items) return <Loading what="Loading the conversation" />;
  if (items.length === 0)
    return (
      <Empty title="Nothing yet">
        The agent has not started; messages and actions appear here as they happen.
      </Empty>
    );
  return (
    <ol class="conversation" aria-label="Conversation">
      {items.map((m, i) =>
        m.type === 'message' ? (
          <li key={i} class={`msg ${m.role}`}>
            <div class="who muted small-text">
              {m.role} · <Time iso={m.created_at} />
            </div>
            <pre class="text">{m.text}</pre>
          </li>
        ) : (
          <li key={i} class={`action ${m.kind === 'read_skill' ? 'skill' : ''}`}>
            <span class="kind">{m.kind === 'read_skill' ? 'loaded skill' : m.kind}</span>{' '}
            <span class="mono">
              {m.kind === 'read_skill'
                ? String(m.input?.bundled_skill_id ?? m.input?.skill_path ?? '')
                : summarize(m.input)}
            </span>
            <details>
              <summary class="small-text muted">input</summary>
              <Json value={m.input} />
            </details>
          </li>
        ),
      )}
    </ol>
  );
}

function summarize(input: Record<string, unknown> | undefined): string {
  if (!input) return '';
  const first = Object.entries(input).find(([, v]) => typeof v === 'string');
  return first ? `${first[0]}: ${String(first[1]).slice(0, 120)}` : '';
}

function FollowUp({ id, state, onSent }: { id: string; state: string; onSent: () => void }) {
  const [message, setMessage] = useState('');
  const send = useAction(() => wire.call('followupRun', { runId: id, body: { message } }));
  return (
    <form
      class="followup"
      onSubmit={async (e) => {
        e.preventDefault();
        if ((await send.run()) !== undefined) {
          setMessage('');
          onSent();
        }
      }}
    >
      <label>
        Follow-up{' '}
        {TERMINAL.includes(state) ? <span class="muted">(continues this run’s conversation)</span> : null}
        <textarea
          name="followup"
          rows={3}
          required
          value={message}
          onInput={(e) => setMessage(e.currentTarget.value)}
        />
      </label>
      <ErrorBox error={send.error} title="Not sent" />
      <button type="submit" disabled={send.pending || !message.trim()}>
        Send follow-up
      </button>
    </form>
  );
}
