import { useState } from 'preact/hooks';
import { api, can, useAction, useLive, wire } from '../api';
import {
  DELIVERY_STATUS_VALUES,
  type WebhookTestFilterRequest,
  type WebhookTestFilterResponse,
} from '../../../src/contract/generated';
import { BASE, Link, navigate } from '../router';
import { Badge, bytes, CopyField, Dialog, Empty, ErrorBox, Json, Loading, Time } from '../ui';
import type { FactoryItem as Factory } from '../../../src/contract/generated';
import { yamlText } from '../yaml';
import { RepoFile, SecretOnce, webhookFile, type Webhook } from './webhooks';

const STATUSES = DELIVERY_STATUS_VALUES;
/** Schemes whose provider issues the secret: factoryd cannot rotate them (docs/webhooks.md). */
const PROVIDER_ISSUED = (w: Webhook) =>
  w.auth_mode === 'signature' && w.signature_scheme !== 'standard_webhooks';

export function WebhookPage({ uid }: { uid: string }) {
  const hook = useLive(() => wire.call('getWebhook', { uid }), [uid], 5000);
  const factoryUid = hook.data?.factory_uid;
  const factory = useLive(
    () => (factoryUid ? wire.call('getFactory', { uid: factoryUid }) : Promise.resolve(undefined)),
    [factoryUid],
  );
  // `?delivery=ID` selects a log entry (a webhook-started run's page links here that way).
  const [selected, setSelected] = useState(
    () => new URLSearchParams(location.search).get('delivery') ?? undefined,
  );
  const select = (id: string) => {
    setSelected(id);
    history.replaceState(null, '', `${location.pathname}?delivery=${encodeURIComponent(id)}`);
  };
  if (hook.error && !hook.data)
    return (
      <section>
        <p class="crumbs">
          <Link href={`${BASE}/factories`}>← Factories</Link>
        </p>
        <ErrorBox error={hook.error} />
      </section>
    );
  if (!hook.data) return <Loading what="Loading the webhook" />;
  const w = hook.data;
  const f = factory.data;
  return (
    <section>
      <p class="crumbs">
        <Link href={`${BASE}/factories/${w.factory_uid}/webhooks`}>
          ← {f ? f.name : 'Factory'} · Webhooks
        </Link>
      </p>
      <div class="pagehead">
        <h1>{w.name}</h1>
        {w.deleted ? (
          <Badge value="failed" label="Deleted" />
        ) : (
          <Badge value={w.enabled ? 'accepted' : 'duplicate'} label={w.enabled ? 'Enabled' : 'Disabled'} />
        )}
      </div>
      {w.description && <p class="muted">{w.description}</p>}
      <div class="grid2">
        <dl class="meta">
          <dt>UID</dt>
          <dd class="mono">{w.uid}</dd>
          <dt>Authentication</dt>
          <dd>{w.auth_mode === 'signature' ? `signature (${w.signature_scheme})` : w.auth_mode}</dd>
          <dt>Team secret</dt>
          <dd class="mono">{w.secret_name}</dd>
          <dt>Delivery ID header</dt>
          <dd class="mono">{w.delivery_id_header ?? '—'}</dd>
          <dt>Created</dt>
          <dd>
            <Time iso={w.created_at} />
          </dd>
        </dl>
        <div>
          <CopyField label="Ingress URL" value={w.ingress_url} />
          {w.awaiting_secret && (
            <p class="warn-text small-text">Awaiting its signing secret: disabled until it is set.</p>
          )}
          {!w.deleted && can('factory:manage') && f && <Manage w={w} f={f} reload={hook.reload} />}
        </div>
      </div>
      <Deliveries uid={w.uid} selected={selected} onSelect={select} />
      <TestFilter w={w} factoryUid={w.factory_uid} delivery={selected} />
    </section>
  );
}

function Manage({ w, f, reload }: { w: Webhook; f: Factory; reload: () => void }) {
  const path = `/webhooks/${w.uid}`;
  const [shown, setShown] = useState<{ webhook: Webhook; secret?: string }>();
  const [dialog, setDialog] = useState<'delete' | 'secret' | 'file' | 'rotate'>();
  const [value, setValue] = useState('');
  const toggle = useAction(() => wire.call(w.enabled ? 'disableWebhook' : 'enableWebhook', { uid: w.uid }));
  const rotate = useAction(() => wire.call('rotateWebhook', { uid: w.uid }));
  const setSecret = useAction(() =>
    wire.call('setWebhookSecret', { uid: w.uid, body: value ? { secret: value } : {} }),
  );
  const remove = useAction(async () => {
    await api.del(path);
    return true;
  });
  if (!f.managed) {
    return (
      <div class="stack">
        <p class="small-text muted">
          This factory is defined by its repository: change webhooks/{w.name}.yaml there (factoryd applies
          each commit).
        </p>
        <button type="button" onClick={() => setDialog('file')}>
          Show the file to commit
        </button>
        {dialog === 'file' && (
          <Dialog title={`webhooks/${w.name}.yaml`} onClose={() => setDialog(undefined)}>
            <RepoFile
              path={`webhooks/${w.name}.yaml`}
              text={webhookFile({ ...w, enabled: !w.enabled })}
              note={`To ${w.enabled ? 'disable' : 'enable'} it, commit this to ${f.repository} (${f.branch}); delete the file to delete the webhook. Rotate its secret with: npx factoryd secrets set ${w.secret_name} --generate …`}
            />
          </Dialog>
        )}
      </div>
    );
  }
  return (
    <div class="stack">
      <div class="actions wrap">
        <label class="switch">
          <input
            type="checkbox"
            role="switch"
            checked={w.enabled}
            disabled={toggle.pending || w.awaiting_secret}
            onChange={async () => {
              await toggle.run();
              reload();
            }}
          />
          Enabled
        </label>
        {!PROVIDER_ISSUED(w) && (
          <button type="button" disabled={rotate.pending} onClick={() => setDialog('rotate')}>
            Rotate secret
          </button>
        )}
        {w.auth_mode === 'signature' && (
          <button type="button" onClick={() => setDialog('secret')}>
            Set secret
          </button>
        )}
        <button type="button" class="danger" onClick={() => setDialog('delete')}>
          Delete
        </button>
      </div>
      <ErrorBox error={toggle.error} />
      {shown && (
        <Dialog title={`The new secret of ${w.name}`} onClose={() => setShown(undefined)}>
          <SecretOnce {...shown} onDone={() => setShown(undefined)} />
        </Dialog>
      )}
      {dialog === 'rotate' && (
        <Dialog title={`Rotate the secret of ${w.name}?`} onClose={() => setDialog(undefined)}>
          <ul class="consequences">
            <li>factoryd generates a new secret and shows it once, here.</li>
            <li>The old secret stops working at once: senders get 401 until they use the new one.</li>
            <li>The team secret {w.secret_name} gets the new value (a new version).</li>
          </ul>
          <ErrorBox error={rotate.error} title="Not rotated" />
          <div class="actions">
            <button type="button" onClick={() => setDialog(undefined)}>
              Keep the secret
            </button>
            <button
              type="button"
              class="danger"
              disabled={rotate.pending}
              onClick={async () => {
                const out = await rotate.run();
                if (out) {
                  setDialog(undefined);
                  setShown(out);
                }
                reload();
              }}
            >
              {rotate.pending ? 'Rotating…' : 'Rotate secret'}
            </button>
          </div>
        </Dialog>
      )}
      {dialog === 'secret' && (
        <Dialog title="Set the signing secret" onClose={() => setDialog(undefined)}>
          <form
            onSubmit={async (e) => {
              e.preventDefault();
              const out = await setSecret.run();
              if (out) {
                setDialog(undefined);
                setValue('');
                if (out.secret) setShown(out);
                reload();
              }
            }}
          >
            <label>
              Secret{' '}
              <span class="muted">
                {w.signature_scheme === 'standard_webhooks'
                  ? '(blank: generate a whsec_… one, shown once)'
                  : '(the value the provider issued)'}
              </span>
              <input
                type="password"
                autocomplete="off"
                value={value}
                onInput={(e) => setValue(e.currentTarget.value)}
              />
            </label>
            <ErrorBox error={setSecret.error} title="Not set" />
            <div class="actions">
              <button type="submit" class="primary" disabled={setSecret.pending}>
                Set secret
              </button>
            </div>
          </form>
        </Dialog>
      )}
      {dialog === 'delete' && (
        <Dialog title={`Delete ${w.name}?`} onClose={() => setDialog(undefined)}>
          <ul class="consequences">
            <li>Senders get 404 at once; nothing they send is logged any more.</li>
            <li>The file webhooks/{w.name}.yaml is removed from the factory in a commit.</li>
            <li>Automations that select {w.uid} stay, and stop firing.</li>
            <li>The UID is never reused: a new webhook named {w.name} gets a new UID and URL.</li>
            <li>The team secret {w.secret_name} stays (other webhooks may use it).</li>
          </ul>
          <ErrorBox error={remove.error} title="Not deleted" />
          <div class="actions">
            <button type="button" onClick={() => setDialog(undefined)}>
              Keep it
            </button>
            <button
              type="button"
              class="danger"
              disabled={remove.pending}
              onClick={async () => {
                if (await remove.run()) {
                  navigate(`${BASE}/factories/${w.factory_uid}/webhooks`);
                }
              }}
            >
              Delete webhook
            </button>
          </div>
        </Dialog>
      )}
    </div>
  );
}

function Deliveries({
  uid,
  selected,
  onSelect,
}: {
  uid: string;
  selected?: string;
  onSelect: (id: string) => void;
}) {
  const [status, setStatus] = useState('');
  const list = useLive(
    () => wire.call('listDeliveries', { uid, query: { status, limit: '50' } }),
    [uid, status],
    2000,
  );
  return (
    <>
      <div class="pagehead sub">
        <h2>
          Delivery log <span class="pulse" aria-label="live" />
        </h2>
        <select aria-label="Status" value={status} onChange={(e) => setStatus(e.currentTarget.value)}>
          <option value="">All statuses</option>
          {STATUSES.map((s) => (
            <option key={s} value={s}>
              {s}
            </option>
          ))}
        </select>
      </div>
      <ErrorBox error={list.error} />
      {!list.data ? (
        <Loading />
      ) : list.data.deliveries.length === 0 ? (
        <Empty title="No deliveries yet">
          Point a sender at the ingress URL; each request shows up here within seconds.
        </Empty>
      ) : (
        <div class="split">
          <div class="tablewrap">
            <table class="list selectable" aria-label="Deliveries">
              <thead>
                <tr>
                  <th>Status</th>
                  <th>Identity</th>
                  <th>Size</th>
                  <th>Received</th>
                </tr>
              </thead>
              <tbody>
                {list.data.deliveries.map((d) => (
                  <tr
                    key={d.id}
                    class={d.id === selected ? 'selected' : ''}
                    tabIndex={0}
                    aria-selected={d.id === selected}
                    onClick={() => onSelect(d.id)}
                    onKeyDown={(e) =>
                      (e.key === 'Enter' || e.key === ' ') && (e.preventDefault(), onSelect(d.id))
                    }
                  >
                    <td>
                      <Badge value={d.status} />
                    </td>
                    <td class="mono small-text identity" title={d.delivery_id ?? undefined}>
                      {d.delivery_id ?? '—'}
                    </td>
                    <td class="nowrap">{d.size_bytes === null ? '—' : bytes(d.size_bytes)}</td>
                    <td>
                      <Time iso={d.received_at} />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          <div>
            {selected ? (
              <DeliveryView uid={uid} id={selected} onSelect={onSelect} />
            ) : (
              <Empty title="Select a delivery">Its payload and the runs it started show here.</Empty>
            )}
          </div>
        </div>
      )}
    </>
  );
}

function DeliveryView({ uid, id, onSelect }: { uid: string; id: string; onSelect: (id: string) => void }) {
  const d = useLive(() => wire.call('getDelivery', { uid, id }), [uid, id], 3000);
  // Re-evaluates the stored payload against today's automations: a new Replayed entry, shown next.
  const replay = useAction(async () => {
    const replayed = await wire.call('replayDelivery', { uid, id });
    onSelect(replayed.id);
  });
  if (d.error) return <ErrorBox error={d.error} />;
  if (!d.data) return <Loading />;
  const e = d.data;
  const entryLink = (other: string) => (
    <button type="button" class="link mono" onClick={() => onSelect(other)}>
      {other}
    </button>
  );
  return (
    <div class="card" aria-label="Delivery">
      <div class="cardhead">
        <Badge value={e.status} />
        <span class="mono small-text">{e.delivery_id ?? '—'}</span>
        {e.status === 'accepted' && can('factory:manage') && (
          <button type="button" onClick={() => void replay.run()} disabled={replay.pending}>
            {replay.pending ? 'Replaying…' : 'Replay'}
          </button>
        )}
      </div>
      {replay.error && <ErrorBox error={replay.error} />}
      <dl class="meta">
        <dt>Received</dt>
        <dd>{e.received_at}</dd>
        <dt>Size</dt>
        <dd>{e.size_bytes === null ? '—' : `${e.size_bytes.toLocaleString('en-US')} bytes`}</dd>
        <dt>From</dt>
        <dd class="mono">{e.client_address ?? '—'}</dd>
        {e.replay_of && (
          <>
            <dt>Replay of</dt>
            <dd>{entryLink(e.replay_of)}</dd>
          </>
        )}
        {e.replayed_as && e.replayed_as.length > 0 && (
          <>
            <dt>Replayed as</dt>
            <dd>
              {e.replayed_as.map((r) => (
                <div key={r}>{entryLink(r)}</div>
              ))}
            </dd>
          </>
        )}
        <dt>Runs started</dt>
        <dd>
          {e.runs.length === 0
            ? 'none'
            : e.runs.map((r) => (
                <div key={r.run_id}>
                  <Link href={`${BASE}/runs/${r.run_id}`} class="mono">
                    {r.run_id}
                  </Link>{' '}
                  <Badge value={r.state} />
                </div>
              ))}
        </dd>
      </dl>
      {e.status === 'accepted' || e.status === 'replayed' ? (
        <>
          <h3>Payload</h3>
          <Json value={e.payload} label="Payload" />
        </>
      ) : (
        <p class="muted small-text">Only Accepted deliveries keep their payload.</p>
      )}
      {e.headers && (
        <details>
          <summary>Headers</summary>
          <Json value={e.headers} />
        </details>
      )}
    </div>
  );
}

type TestResult = WebhookTestFilterResponse;

/** What the box holds before anything is typed when no automation of the factory uses this webhook. */
const SAMPLE_FILTER = yamlText({ payload: { action: ['opened'] } });

/** A stored filter (jsonb orders keys its own way) with its fields in the order files write them. */
function asWritten(filter: Record<string, unknown> = {}): Record<string, unknown> {
  const { webhook_ids, payload, headers, ...rest } = filter;
  return Object.fromEntries(
    Object.entries({ webhook_ids, payload, headers, ...rest }).filter(([, v]) => v !== undefined),
  );
}

function TestFilter({ w, factoryUid, delivery }: { w: Webhook; factoryUid?: string; delivery?: string }) {
  const def = useLive(
    () => (factoryUid ? wire.call('getFactoryDefinition', { uid: factoryUid }) : Promise.resolve(undefined)),
    [factoryUid],
  );
  const automations = (def.data?.automations ?? []).flatMap((a) => {
    const trigger = a.triggers.find((t) => t.filter?.webhook_ids?.includes(w.uid));
    return trigger ? [{ name: a.name, filter: trigger.filter }] : [];
  });
  const [automation, setAutomation] = useState('');
  // Until something is typed, the box holds this webhook's own automation's filter (the first one).
  const own = automations[0];
  const [typed, setTyped] = useState<string>();
  const filter = typed ?? (own ? yamlText(asWritten(own.filter)) : SAMPLE_FILTER);
  const [result, setResult] = useState<TestResult>();
  const test = useAction(async () => {
    // A verdict stays on screen only while it answers what is asked now.
    setResult(undefined);
    // The filter goes as text: the service reads it as it reads automation files.
    const body: WebhookTestFilterRequest = automation ? { automation } : { filter };
    if (delivery) body.delivery = delivery;
    setResult(await wire.call('testWebhookFilter', { uid: w.uid, body }));
  });
  return (
    <>
      <h2>Test filter</h2>
      <form
        class="card testfilter"
        onSubmit={(e) => {
          e.preventDefault();
          void test.run();
        }}
      >
        <p class="small-text muted">
          Would a stored Accepted delivery (
          {delivery ? 'the one selected above' : 'the newest one; select another in the log'}) start a run?
        </p>
        <label>
          Against
          <select
            value={automation}
            onChange={(e) => {
              setAutomation(e.currentTarget.value);
              setResult(undefined);
            }}
          >
            <option value="">A filter typed here</option>
            {automations.map((a) => (
              <option key={a.name} value={a.name}>
                automation {a.name}
              </option>
            ))}
          </select>
        </label>
        {!automation && (
          <label>
            Filter{' '}
            <span class="muted">
              (YAML, as an automation’s trigger writes it under filter:
              {own && typed === undefined ? `; this is automation ${own.name}’s` : ''})
            </span>
            <textarea
              class="mono"
              name="filter"
              rows={Math.min(14, Math.max(6, filter.split('\n').length + 1))}
              spellcheck={false}
              value={filter}
              onInput={(e) => {
                setTyped(e.currentTarget.value);
                setResult(undefined);
              }}
            />
          </label>
        )}
        <ErrorBox error={test.error} title="Not tested" />
        <div class="actions">
          <button type="submit" class="primary" disabled={test.pending}>
            {test.pending ? 'Testing…' : 'Test filter'}
          </button>
        </div>
        {result && <Verdict result={result} />}
      </form>
    </>
  );
}

function Verdict({ result }: { result: TestResult }) {
  const { paths, mismatches } = result.payload_check;
  return (
    <div
      class={`verdict ${result.result === 'would_trigger' ? 'ok' : 'bad'}`}
      role="status"
      aria-label="Verdict"
    >
      <strong>{result.result === 'would_trigger' ? 'Would trigger' : 'Would not trigger'}</strong>
      <span class="muted small-text">
        against {result.automation ? `automation ${result.automation}, ` : ''}delivery{' '}
        <span class="mono">{result.delivery.delivery_id ?? result.delivery.id}</span> (
        <Time iso={result.delivery.received_at} />)
      </span>
      <ul class="checks">
        <li class={result.webhook_check.passed ? 'pass' : 'fail'}>
          Webhook check: {result.webhook_check.passed ? 'passed' : 'failed'} — {result.webhook_check.message}
        </li>
        <li class={result.payload_check.passed ? 'pass' : 'fail'}>
          Payload check: {result.payload_check.passed ? 'passed' : 'failed'} — {result.payload_check.message}
        </li>
      </ul>
      {/* A body that is no object fails without a mismatch: the check's message says so, no table. */}
      {paths.length > 0 && (result.payload_check.passed || mismatches.length > 0) && (
        <table class="list paths" aria-label="Payload paths">
          <thead>
            <tr>
              <th>Path</th>
              <th>Outcome</th>
              <th>Expected</th>
              <th>Actual</th>
            </tr>
          </thead>
          <tbody>
            {paths.map((p) => {
              const m = mismatches.find((x) => x.path === p);
              return (
                <tr key={p} class={m ? 'fail' : 'pass'}>
                  <td class="mono">{p}</td>
                  <td>{m ? `fails ${m.condition}` : 'matches'}</td>
                  <td class="mono small-text">{m ? JSON.stringify(m.expected) : ''}</td>
                  <td class="mono small-text">
                    {m ? (m.present ? JSON.stringify(m.actual) : '(missing)') : ''}
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
    </div>
  );
}
