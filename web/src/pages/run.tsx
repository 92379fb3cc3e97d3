import { useState } from 'preact/hooks';
import { api, can, useAction, useLive } from '../api';
import { BASE, Link } from '../router';
import { Badge, CopyField, Empty, ErrorBox, Json, Loading, Time } from '../ui';
import type { RunItem } from './runs';

const TERMINAL = ['SUCCEEDED', 'FAILED', 'ERROR', 'CANCELLED'];

interface ConversationItem {
  type: 'message' | 'action';
  role?: string;
  text?: string;
  kind?: string;
  input?: Record<string, unknown>;
  execution: number;
  created_at: string;
}

export function RunPage({ id }: { id: string }) {
  const run = useLive(
    () => api.get<RunItem & Record<string, any>>(`/agent/runs/${encodeURIComponent(id)}`),
    [id],
    2000,
  );
  const live = run.data ? !TERMINAL.includes(run.data.state) : true;
  const conversation = useLive(
    () => api.get<{ messages: ConversationItem[] }>(`/agent/runs/${encodeURIComponent(id)}/conversation`),
    // Polled while the run is live; when it ends, `everyMs` turning 0 fetches it one last time.
    [id],
    live ? 2000 : 0,
  );
  const cancel = useAction(() => api.post(`/agent/runs/${encodeURIComponent(id)}/cancel`));
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
            onClick={async () => {
              if (confirm('Cancel this run? The agent is stopped; its conversation so far is kept.')) {
                await cancel.run();
                run.reload();
              }
            }}
          >
            Cancel run
          </button>
        )}
      </div>
      <ErrorBox error={cancel.error} title="Cancel failed" />
      <ErrorBox error={run.error} />
      {r.status_message && (
        <p class={`status ${r.state === 'SUCCEEDED' ? 'ok' : TERMINAL.includes(r.state) ? 'bad' : ''}`}>
          {r.status_message.message}
          {r.status_message.error_code ? ` (${r.status_message.error_code})` : ''}
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
            <dd>{r.run_time ?? '—'}</dd>
            <dt>Runs on</dt>
            <dd>
              {r.execution_location === 'self_hosted'
                ? `self-hosted: ${String(config.worker_host)}`
                : 'service-hosted workers'}
            </dd>
            {r.parent_run_id && (
              <>
                <dt>Parent</dt>
                <dd>
                  <Link href={`${BASE}/runs/${r.parent_run_id}`}>{r.parent_run_id}</Link>
                </dd>
              </>
            )}
            {r.metadata &&
              Object.entries(r.metadata as Record<string, string>).map(([k, v]) => (
                <>
                  <dt key={k}>meta: {k}</dt>
                  <dd>{v}</dd>
                </>
              ))}
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
        </div>
      </div>
      <h2>Conversation {live && <span class="pulse" aria-label="live" />}</h2>
      <ErrorBox error={conversation.error} />
      <Conversation items={conversation.data?.messages} />
      {Array.isArray(r.artifacts) && r.artifacts.length > 0 && (
        <>
          <h2>Artifacts</h2>
          {(r.artifacts as Array<Record<string, unknown>>).map((a, i) => (
            <details key={i} class="artifact" open={i === 0}>
              <summary>{String(a.name ?? a.artifact_type ?? `artifact ${i + 1}`)}</summary>
              {typeof a.content === 'string' ? <pre class="text">{a.content}</pre> : <Json value={a} />}
            </details>
          ))}
        </>
      )}
      {can('runs:write') && <FollowUp id={id} state={r.state} onSent={run.reload} />}
    </section>
  );
}

function Conversation({ items }: { items?: ConversationItem[] }) {
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
  const send = useAction(() => api.post(`/agent/runs/${encodeURIComponent(id)}/followups`, { message }));
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
