import { useState } from 'preact/hooks';
import { can, useAction, useLive, wire } from '../api';
import { BASE, Link } from '../router';
import { Badge, Copy, CopyField, Dialog, Empty, ErrorBox, Loading, Time } from '../ui';
import { yamlText } from '../yaml';
import type { FactoryItem as Factory } from '../../../src/contract/generated';
import {
  WEBHOOK_FILE_SIGNATURE_SCHEME_VALUES,
  type WebhookCreateRequest,
  type WebhookFile,
  type WebhookItem,
  type WebhookSummary,
} from '../../../src/contract/generated';

/** A webhook from a factory's list (a summary) or from GET /webhooks/{uid} (the whole item). */
export type Webhook = WebhookSummary & Partial<WebhookItem>;

/** The signature schemes a webhook file may name (schemas/webhook.schema.json). */
export const SCHEMES = WEBHOOK_FILE_SIGNATURE_SCHEME_VALUES;
const AUTH_MODES: Array<[Webhook['auth_mode'], string]> = [
  ['token', 'Bearer token (Authorization header)'],
  ['url_token', 'Token in the URL (for senders without headers)'],
  ['signature', 'Provider signature (GitHub, Stripe, Standard Webhooks, …)'],
];

export function WebhooksTab({ factory }: { factory: Factory }) {
  const list = useLive(() => wire.call('listFactoryWebhooks', { uid: factory.uid }), [factory.uid], 5000);
  const [creating, setCreating] = useState(false);
  const [created, setCreated] = useState<{ webhook: Webhook; secret?: string }>();
  const manage = can('factory:manage');
  return (
    <>
      <div class="pagehead sub">
        <h2>Webhooks</h2>
        {manage && (
          <button type="button" class="primary" onClick={() => setCreating(true)}>
            {factory.managed ? 'Create webhook' : 'Add a webhook…'}
          </button>
        )}
      </div>
      {created && <SecretOnce {...created} onDone={() => setCreated(undefined)} />}
      <ErrorBox error={list.error} />
      {!list.data ? (
        <Loading />
      ) : list.data.webhooks.length === 0 ? (
        <Empty title="No webhooks yet">
          A webhook gives senders (GitHub, Stripe, CI jobs, anything that can POST JSON) a URL whose
          deliveries start runs through an automation.
        </Empty>
      ) : (
        <div class="tablewrap">
          <table class="list" aria-label="Webhooks">
            <thead>
              <tr>
                <th>Name</th>
                <th>Auth</th>
                <th>Status</th>
                <th class="hide-s">Ingress URL</th>
                <th class="hide-s">Created</th>
              </tr>
            </thead>
            <tbody>
              {list.data.webhooks.map((w) => (
                <tr key={w.uid}>
                  <td>
                    <Link href={`${BASE}/webhooks/${w.uid}`} class="rowlink">
                      {w.name}
                    </Link>
                    <div class="mono muted small-text">{w.uid}</div>
                  </td>
                  <td>{w.auth_mode === 'signature' ? w.signature_scheme : w.auth_mode}</td>
                  <td>
                    <Badge
                      value={w.enabled ? 'accepted' : 'duplicate'}
                      label={w.enabled ? 'Enabled' : 'Disabled'}
                    />
                  </td>
                  <td class="hide-s mono small-text wrap">{w.ingress_url}</td>
                  <td class="hide-s">
                    <Time iso={w.created_at} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {creating && (
        <CreateWebhook
          factory={factory}
          onClose={() => setCreating(false)}
          onCreated={(out) => {
            setCreating(false);
            setCreated(out);
            list.reload();
          }}
        />
      )}
    </>
  );
}

/** The file a repository-backed factory commits instead (the repository is the source of truth). */
export function webhookFile(w: {
  auth_mode: WebhookFile['authMode'];
  signature_scheme?: string;
  secret_name: string;
  delivery_id_header?: string;
  enabled?: boolean;
}): string {
  // The file's fields as its schema spells them (a renamed one fails the type check here).
  const file: WebhookFile = {
    authMode: w.auth_mode,
    ...(w.auth_mode === 'signature' && w.signature_scheme
      ? { signatureScheme: w.signature_scheme as WebhookFile['signatureScheme'] }
      : {}),
    secretName: w.secret_name,
    ...(w.delivery_id_header ? { deliveryIdHeader: w.delivery_id_header } : {}),
    ...(w.enabled === false ? { enabled: false } : {}),
  };
  return yamlText(file);
}

function CreateWebhook({
  factory,
  onClose,
  onCreated,
}: {
  factory: Factory;
  onClose: () => void;
  onCreated: (out: { webhook: Webhook; secret?: string }) => void;
}) {
  const [name, setName] = useState('');
  const [mode, setMode] = useState<Webhook['auth_mode']>('token');
  const [scheme, setScheme] = useState('standard_webhooks');
  const [secret, setSecret] = useState('');
  const [secretName, setSecretName] = useState('');
  const [header, setHeader] = useState('');
  const suggested = `webhook-${name || '<name>'}`;
  const create = useAction(() =>
    wire.call('createWebhook', {
      uid: factory.uid,
      body: {
        name,
        auth_mode: mode,
        ...(mode === 'signature'
          ? { signature_scheme: scheme as WebhookCreateRequest['signature_scheme'] }
          : {}),
        ...(mode === 'signature' && secret ? { secret } : {}),
        ...(secretName ? { secret_name: secretName } : {}),
        ...(header ? { delivery_id_header: header } : {}),
      },
    }),
  );
  const fileSecretName = secretName || suggested;
  return (
    <Dialog title={factory.managed ? 'Create webhook' : 'Add a webhook to the repository'} onClose={onClose}>
      <form
        onSubmit={async (e) => {
          e.preventDefault();
          if (!factory.managed) return;
          const out = await create.run();
          if (out) onCreated(out);
        }}
      >
        <label>
          Name <span class="muted">(the file name; cannot be changed later)</span>
          <input
            name="name"
            autoFocus
            required
            pattern="[A-Za-z0-9][A-Za-z0-9._\-]{0,63}"
            value={name}
            onInput={(e) => setName(e.currentTarget.value)}
          />
        </label>
        <fieldset>
          <legend>Authentication</legend>
          {AUTH_MODES.map(([value, label]) => (
            <label key={value} class="radio">
              <input
                type="radio"
                name="auth_mode"
                value={value}
                checked={mode === value}
                onChange={() => setMode(value)}
              />
              {label}
            </label>
          ))}
        </fieldset>
        {mode === 'signature' && (
          <>
            <label>
              Provider scheme
              <select
                name="signature_scheme"
                value={scheme}
                onChange={(e) => setScheme(e.currentTarget.value)}
              >
                {SCHEMES.map((s) => (
                  <option key={s}>{s}</option>
                ))}
              </select>
            </label>
            {factory.managed && (
              <label>
                Provider signing secret{' '}
                <span class="muted">
                  {scheme === 'standard_webhooks'
                    ? '(blank: factoryd generates a whsec_… secret and shows it once)'
                    : '(blank: the webhook is created disabled until you set the secret the provider issues)'}
                </span>
                <input
                  type="password"
                  name="secret"
                  autocomplete="off"
                  value={secret}
                  onInput={(e) => setSecret(e.currentTarget.value)}
                />
              </label>
            )}
          </>
        )}
        <label>
          Team secret name <span class="muted">(an existing one is reused, its value never shown)</span>
          <input
            name="secret_name"
            placeholder={suggested}
            value={secretName}
            onInput={(e) => setSecretName(e.currentTarget.value)}
          />
        </label>
        <label>
          Delivery ID header{' '}
          <span class="muted">(optional: the header that identifies a delivery, for duplicates)</span>
          <input
            name="delivery_id_header"
            placeholder="e.g. X-Request-Id"
            value={header}
            onInput={(e) => setHeader(e.currentTarget.value)}
          />
        </label>
        {factory.managed ? (
          <>
            <ErrorBox error={create.error} title="Not created" />
            <div class="actions">
              <button type="submit" class="primary" disabled={create.pending}>
                {create.pending ? 'Creating…' : 'Create webhook'}
              </button>
            </div>
          </>
        ) : (
          <RepoFile
            path={`webhooks/${name || '<name>'}.yaml`}
            text={webhookFile({
              auth_mode: mode,
              signature_scheme: scheme,
              secret_name: fileSecretName,
              delivery_id_header: header,
            })}
            note={`This factory is defined by ${factory.repository} (${factory.branch}): commit this file there. Create the secret first: npx factoryd secrets set ${fileSecretName} --generate ${mode === 'token' ? 'token' : mode === 'url_token' ? 'url-safe' : 'whsec'} (or pipe the provider's secret to it).`}
          />
        )}
      </form>
    </Dialog>
  );
}

export function RepoFile({ path, text, note }: { path: string; text: string; note: string }) {
  return (
    <div class="repofile" aria-label="File to commit">
      <p class="small-text">{note}</p>
      <div class="filehead">
        <span class="mono">{path}</span>
        <Copy text={text} label="Copy the file" />
      </div>
      <pre class="code" aria-label="File content">
        {text}
      </pre>
    </div>
  );
}

/** The one time a generated secret is shown, with the sender's URL and a curl to try it. */
export function SecretOnce({
  webhook,
  secret,
  onDone,
}: {
  webhook: Webhook;
  secret?: string;
  onDone: () => void;
}) {
  const url =
    secret && webhook.auth_mode === 'url_token'
      ? webhook.ingress_url.replace('{token}', secret)
      : webhook.ingress_url;
  const body = `'{"hello":"world"}'`;
  const curl =
    webhook.auth_mode === 'token'
      ? `curl -X POST '${url}' -H 'Authorization: Bearer ${secret ?? '<secret>'}' -H 'Content-Type: application/json' -d ${body}`
      : webhook.auth_mode === 'url_token'
        ? `curl -X POST '${url}' -H 'Content-Type: application/json' -d ${body}`
        : undefined;
  return (
    <div class="card once" role="status" aria-label="New secret">
      <div class="cardhead">
        <strong>{webhook.name}</strong>
        <span class="warn-text">Copy the secret now: it is not shown again.</span>
      </div>
      {secret ? (
        <CopyField label="Secret" value={secret} />
      ) : (
        <p class="small-text">
          {webhook.awaiting_secret
            ? 'Created disabled: paste the secret the provider issues (Set secret on the webhook page) to enable it.'
            : 'The secret you gave is stored and never shown.'}
        </p>
      )}
      <p class="small-text muted">
        Ingress URL{' '}
        {webhook.auth_mode === 'url_token' && secret ? '(holds the token: treat it as a secret)' : ''}
      </p>
      <CopyField label="Ingress URL" value={url} />
      {curl ? (
        <>
          <p class="small-text muted">Try it</p>
          <CopyField label="curl example" value={curl} />
        </>
      ) : (
        <p class="small-text muted">
          Give the provider ({webhook.signature_scheme}) this URL{secret ? ' and secret' : ''}: it signs each
          delivery, and factoryd checks the signature over the exact bytes.
        </p>
      )}
      <div class="actions">
        <Link href={`${BASE}/webhooks/${webhook.uid}`}>Open the webhook</Link>
        <button type="button" onClick={onDone}>
          I have copied it
        </button>
      </div>
    </div>
  );
}
