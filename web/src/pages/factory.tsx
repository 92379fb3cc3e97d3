import { useState } from 'preact/hooks';
import { api, can, useAction, useLive, wire } from '../api';
import type { FactoryApply, FactoryItem, FactoryPlanResponse } from '../../../src/contract/generated';
import { BASE, Link } from '../router';
import { Badge, Empty, ErrorBox, Json, Loading, short, Tabs, Time } from '../ui';
import { WebhooksTab } from './webhooks';

type Apply = FactoryApply;

export function FactoryPage({ uid, tab }: { uid: string; tab: string }) {
  const factory = useLive(() => wire.call('getFactory', { uid }), [uid], 4000);
  if (factory.error && !factory.data)
    return (
      <section>
        <p class="crumbs">
          <Link href={`${BASE}/factories`}>← Factories</Link>
        </p>
        <ErrorBox error={factory.error} />
      </section>
    );
  if (!factory.data) return <Loading what="Loading the factory" />;
  const f = factory.data;
  const base = `${BASE}/factories/${f.uid}`;
  return (
    <section>
      <p class="crumbs">
        <Link href={`${BASE}/factories`}>← Factories</Link>
      </p>
      <div class="pagehead">
        <h1>{f.name}</h1>
        <Badge value={f.ready ? 'applied' : 'failed'} label={f.ready ? 'Ready' : 'Not ready'} />
      </div>
      {f.description && <p class="muted">{f.description}</p>}
      <Tabs
        current={tab}
        tabs={[
          { id: 'overview', label: 'Status', href: base },
          { id: 'definition', label: 'Agents, skills & automations', href: `${base}/definition` },
          { id: 'webhooks', label: 'Webhooks', href: `${base}/webhooks` },
        ]}
      />
      {tab === 'definition' ? (
        <Definition uid={f.uid} />
      ) : tab === 'webhooks' ? (
        <WebhooksTab factory={f} />
      ) : (
        <Overview f={f} reload={factory.reload} />
      )}
    </section>
  );
}

function Overview({ f, reload }: { f: FactoryItem; reload: () => void }) {
  // Refresh now: the newest apply when it was pressed; the answer is the first apply after that one.
  const [refreshed, setRefreshed] = useState<{ after: string | undefined }>();
  const [pace, setPace] = useState(5000);
  const applies = useLive(
    () => wire.call('listFactoryApplies', { uid: f.uid, query: { limit: 20 } }),
    [f.uid],
    pace,
  );
  const newest = applies.data?.applies[0];
  const answer = refreshed && newest && newest.started_at !== refreshed.after ? newest : undefined;
  // Polled fast while a requested reconcile has not been recorded yet.
  const wanted = refreshed && !answer ? 1000 : 5000;
  if (wanted !== pace) setPace(wanted);
  const refresh = useAction(async () => {
    await api.post(`/factory/${f.uid}/refresh`);
    return true;
  });
  const [plan, setPlan] = useState<FactoryPlanResponse>();
  const loadPlan = useAction(async () => setPlan(await wire.call('planFactory', { uid: f.uid })));
  return (
    <>
      <div class="grid2">
        <dl class="meta">
          <dt>Status</dt>
          <dd>
            {f.ready ? 'Ready' : 'Not ready'}
            {f.reason ? ` — ${f.reason}` : ''}
          </dd>
          {f.message && (
            <>
              <dt>Message</dt>
              <dd class="wrap">{f.message}</dd>
            </>
          )}
          <dt>Repository</dt>
          <dd class="mono wrap">
            {f.managed
              ? 'managed by factoryd (changes made here are commits)'
              : `${f.repository} @ ${f.branch}`}
          </dd>
          <dt>Attempted</dt>
          <dd class="mono" title={f.last_attempted_revision ?? ''}>
            {short(f.last_attempted_revision)}
          </dd>
          <dt>Applied</dt>
          <dd class="mono" title={f.last_applied_revision ?? ''}>
            {short(f.last_applied_revision)}
            {f.last_attempted_revision && f.last_attempted_revision !== f.last_applied_revision && (
              <span class="warn-text"> (the newer attempt did not apply)</span>
            )}
          </dd>
        </dl>
        <div class="stack">
          {can('factory:manage') && (
            <button
              type="button"
              disabled={refresh.pending || (!!refreshed && !answer)}
              onClick={async () => {
                const after = newest?.started_at;
                if (await refresh.run()) setRefreshed({ after });
                reload();
                applies.reload();
              }}
            >
              {refresh.pending || (refreshed && !answer) ? 'Refreshing…' : 'Refresh now'}
            </button>
          )}
          {refreshed && (
            <p class="small-text" role="status" aria-label="Refresh">
              {!answer
                ? 'Reconcile requested: fetching the branch and applying its head…'
                : answer.result === 'applied'
                  ? `Refreshed: applied ${short(answer.revision)}.`
                  : answer.result === 'unchanged'
                    ? `Refreshed: ${short(answer.revision)} is already live, nothing changed.`
                    : `Refreshed: ${short(answer.revision)} did not apply (${answer.errors.length} error${answer.errors.length === 1 ? '' : 's'}, below).`}
            </p>
          )}
          <button type="button" disabled={loadPlan.pending} onClick={() => loadPlan.run()}>
            {loadPlan.pending ? 'Planning…' : 'Plan the next reconcile'}
          </button>
          <ErrorBox error={refresh.error ?? loadPlan.error} />
          {plan && (
            <div class="card" aria-label="Plan">
              <strong>
                Next reconcile of {short(plan.revision)}:{' '}
                {plan.result === 'failed' ? 'would fail' : 'would apply'}
              </strong>
              <Errors errors={plan.errors} />
              <PlanView plan={plan.plan} />
            </div>
          )}
        </div>
      </div>
      <h2>Apply history</h2>
      <ErrorBox error={applies.error} />
      {!applies.data ? (
        <Loading />
      ) : applies.data.applies.length === 0 ? (
        <Empty title="Never reconciled">The first reconcile records its outcome here.</Empty>
      ) : (
        <ol class="applies">
          {applies.data.applies.map((a, i) => (
            <li key={i} class="card">
              <div class="cardhead">
                <Badge value={a.result} />
                <span class="mono">{short(a.revision)}</span>
                <span class="muted small-text">
                  <Time iso={a.started_at} /> · {a.duration_ms} ms
                </span>
              </div>
              {a.reason && a.result === 'failed' && <p class="small-text">{a.reason}</p>}
              <Errors errors={a.errors} />
              <PlanView plan={a.plan} />
            </li>
          ))}
        </ol>
      )}
    </>
  );
}

function Errors({ errors }: { errors: Apply['errors'] }) {
  if (!errors?.length) return null;
  return (
    <ul class="errors">
      {errors.map((e, i) => (
        <li key={i}>
          <span class="mono">
            {e.path}:{e.line}
          </span>{' '}
          {e.message}
        </li>
      ))}
    </ul>
  );
}

function PlanView({ plan }: { plan?: Apply['plan'] | null }) {
  if (!plan) return null;
  const lines = Object.entries(plan).flatMap(([kind, k]) => [
    ...k.created.map((n) => `+ ${kind.replace(/s$/, '')} ${n}`),
    ...k.updated.map((n) => `~ ${kind.replace(/s$/, '')} ${n}`),
    ...k.deleted.map((n) => `- ${kind.replace(/s$/, '')} ${n}`),
  ]);
  if (!lines.length) return <p class="muted small-text">No changes.</p>;
  return <pre class="code plan">{lines.join('\n')}</pre>;
}

function Definition({ uid }: { uid: string }) {
  const def = useLive(() => wire.call('getFactoryDefinition', { uid }), [uid]);
  if (def.error) return <ErrorBox error={def.error} />;
  if (!def.data) return <Loading />;
  const d = def.data;
  return (
    <div class="grid2">
      <div>
        <h2>Agents</h2>
        {d.agents.length === 0 ? (
          <Empty title="No agents applied" />
        ) : (
          <ul class="plain">
            {d.agents.map((a) => (
              <li key={a.path}>
                <strong>{a.name}</strong>{' '}
                {a.agent_type === 'FOREMAN' && <span class="badge live">foreman</span>}
                <div class="muted small-text">{a.description ?? a.path}</div>
              </li>
            ))}
          </ul>
        )}
        <h2>Skills</h2>
        {d.skills.length === 0 ? (
          <Empty title="No skills">Add skills/&lt;name&gt;/SKILL.md to the repository.</Empty>
        ) : (
          <ul class="plain">
            {d.skills.map((s) => (
              <li key={s.path}>
                <strong>{s.name}</strong>
                <div class="muted small-text">{s.description ?? s.path}</div>
              </li>
            ))}
          </ul>
        )}
      </div>
      <div>
        <h2>Automations</h2>
        {d.automations.length === 0 ? (
          <Empty title="No automations">An automation starts a run when its trigger fires.</Empty>
        ) : (
          <ul class="plain">
            {d.automations.map((a) => (
              <li key={a.path} class="card">
                <div class="cardhead">
                  <strong>{a.name}</strong>
                  <Badge
                    value={a.enabled ? 'applied' : 'unchanged'}
                    label={a.enabled ? 'enabled' : 'disabled'}
                  />
                  <span class="muted small-text">agent: {a.agent ?? 'foreman'}</span>
                </div>
                {a.triggers.map((t, i) => (
                  <div key={i} class="trigger">
                    <span class="small-text">
                      on {t.provider} {t.event} from{' '}
                      {t.webhooks.map((w) => (
                        <Link key={w.uid} href={`${BASE}/webhooks/${w.uid}`} class="mono">
                          {w.name ?? '(unknown webhook)'}
                          {w.deleted ? ' (deleted)' : ''} · {w.uid}
                        </Link>
                      ))}
                    </span>
                    {t.filter?.payload !== undefined && (
                      <Json value={t.filter.payload} label="Payload filter" />
                    )}
                  </div>
                ))}
              </li>
            ))}
          </ul>
        )}
      </div>
    </div>
  );
}
