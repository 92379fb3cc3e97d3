/** Shared pieces. Everything from the API is rendered as text: no innerHTML anywhere in the app. */
import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import type { ApiProblem } from './api';

export function ErrorBox({ error, title }: { error?: ApiProblem; title?: string }) {
  if (!error) return null;
  return (
    <div class="error" role="alert">
      <strong>
        {title ?? error.title}
        {error.status ? ` (${error.status})` : ''}
      </strong>
      {error.detail && <p>{error.detail}</p>}
    </div>
  );
}

export function Empty({ title, children }: { title: string; children?: ComponentChildren }) {
  return (
    <div class="empty">
      <p class="empty-title">{title}</p>
      {children && <div class="muted">{children}</div>}
    </div>
  );
}

export function Loading({ what = 'Loading' }: { what?: string }) {
  return (
    <p class="muted" aria-busy="true">
      {what}…
    </p>
  );
}

const STATE_TONE: Record<string, string> = {
  SUCCEEDED: 'ok',
  accepted: 'ok',
  replayed: 'ok',
  applied: 'ok',
  FAILED: 'bad',
  ERROR: 'bad',
  failed: 'bad',
  rejected_auth: 'bad',
  rejected_invalid_json: 'bad',
  rejected_too_large: 'bad',
  CANCELLED: 'dim',
  duplicate: 'dim',
  unchanged: 'dim',
  BLOCKED: 'warn',
  INPROGRESS: 'live',
  CLAIMED: 'live',
};

const STATUS_WORDS: Record<string, string> = {
  accepted: 'Accepted',
  replayed: 'Replayed',
  duplicate: 'Duplicate',
  rejected_auth: 'Rejected (auth)',
  rejected_invalid_json: 'Rejected (invalid JSON)',
  rejected_too_large: 'Rejected (too large)',
};

export function Badge({ value, label }: { value: string; label?: string }) {
  return <span class={`badge ${STATE_TONE[value] ?? ''}`}>{label ?? STATUS_WORDS[value] ?? value}</span>;
}

export function ago(iso: string | undefined | null, now = Date.now()): string {
  if (!iso) return '—';
  const s = Math.round((now - new Date(iso).getTime()) / 1000);
  if (s < 5) return 'just now';
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ago`;
  return new Date(iso).toISOString().slice(0, 16).replace('T', ' ');
}

export function Time({ iso }: { iso?: string | null }) {
  if (!iso) return <span class="muted">—</span>;
  return (
    <time dateTime={iso} title={iso}>
      {ago(iso)}
    </time>
  );
}

export function bytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

/** JSON pretty-printed as text (a hostile payload stays inert). */
export function Json({ value, label }: { value: unknown; label?: string }) {
  return (
    <pre class="code" aria-label={label} tabIndex={0}>
      {JSON.stringify(value, null, 2)}
    </pre>
  );
}

export function Copy({ text, label = 'Copy' }: { text: string; label?: string }) {
  const [done, setDone] = useState(false);
  return (
    <button
      type="button"
      class="small"
      onClick={async () => {
        try {
          await navigator.clipboard.writeText(text);
          setDone(true);
          setTimeout(() => setDone(false), 1500);
        } catch {
          /* clipboard refused (e.g. not a secure context): the value is on screen to select */
        }
      }}
    >
      {done ? 'Copied' : label}
    </button>
  );
}

/** A value to copy, in a monospace box with its button. */
export function CopyField({ value, label }: { value: string; label: string }) {
  return (
    <div class="copyfield">
      <code aria-label={label}>{value}</code>
      <Copy text={value} />
    </div>
  );
}

/** A modal on the native <dialog>: focus stays inside, Escape closes it. */
export function Dialog({
  title,
  onClose,
  children,
}: {
  title: string;
  onClose: () => void;
  children: ComponentChildren;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = ref.current!;
    if (!d.open) d.showModal();
    const close = () => onClose();
    d.addEventListener('close', close);
    return () => d.removeEventListener('close', close);
  }, []);
  return (
    <dialog ref={ref} aria-label={title}>
      <header class="dialog-head">
        <h2>{title}</h2>
        <button type="button" class="ghost" aria-label="Close" onClick={() => ref.current?.close()}>
          ✕
        </button>
      </header>
      {children}
    </dialog>
  );
}

export function Tabs({
  tabs,
  current,
}: {
  tabs: Array<{ href: string; label: string; id: string }>;
  current: string;
}) {
  return (
    <nav class="tabs" aria-label="Sections">
      {tabs.map((t) => (
        <a
          key={t.id}
          href={t.href}
          aria-current={t.id === current ? 'page' : undefined}
          onClick={(e) => {
            if (e.button !== 0 || e.metaKey || e.ctrlKey) return;
            e.preventDefault();
            history.pushState(null, '', t.href);
            dispatchEvent(new PopStateEvent('popstate'));
          }}
        >
          {t.label}
        </a>
      ))}
    </nav>
  );
}

export function short(sha: string | null | undefined): string {
  return sha ? sha.slice(0, 10) : '—';
}
