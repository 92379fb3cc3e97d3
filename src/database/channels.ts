/**
 * A LISTEN/NOTIFY channel: its name in PostgreSQL and how its payload travels (NOTIFY payloads are
 * text). `decode` throws on a payload that is not one of ours (another version may send it), which
 * is then dropped.
 */
export interface Channel<T> {
  readonly name: string;
  encode(payload: T): string;
  decode(raw: string): T;
}

const NAME = /^[a-z_][a-z0-9_]{0,62}$/;

function channel<T>(name: string, encode: (p: T) => string, decode: (raw: string) => T): Channel<T> {
  // Names go into LISTEN unquoted: only plain lower-case identifiers.
  if (!NAME.test(name)) throw new Error(`channel name ${JSON.stringify(name)} is not a plain identifier`);
  return { name, encode, decode };
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A channel whose payload is one row's id (a UUID). */
const idChannel = (name: string): Channel<string> =>
  channel(
    name,
    (id) => id,
    (raw) => {
      if (!UUID.test(raw)) throw new Error('not a row id');
      return raw;
    },
  );

/** A channel that carries no payload: the news is that something happened. */
const signalChannel = (name: string): Channel<void> =>
  channel(
    name,
    () => '',
    () => undefined,
  );

/** A channel whose payload is a JSON object; `valid` checks what arrives. */
const jsonChannel = <T extends object>(
  name: string,
  valid: (v: Record<string, unknown>) => boolean,
): Channel<T> =>
  channel(name, JSON.stringify, (raw) => {
    const v: unknown = JSON.parse(raw);
    if (v === null || typeof v !== 'object' || Array.isArray(v) || !valid(v as Record<string, unknown>))
      throw new Error('not the expected object');
    return v as T;
  });

export interface RunControl {
  run_id: string;
  kind: 'followup' | 'cancel' | 'interrupt';
}

/**
 * Every channel of the service: its one definition of name and payload. A new one is one line here;
 * the process's single listener (Notifications) LISTENs to it once someone subscribes.
 */
export const CHANNELS = {
  /** An apply (or a factory's removal) committed; payload: the factory's id. */
  definitionsApplied: idChannel('factoryd_definitions_applied'),
  /** Some run became QUEUED. */
  runsQueued: signalChannel('factoryd_runs_queued'),
  /** A follow-up, interrupt or cancel for one live run. */
  runControl: jsonChannel<RunControl>(
    'factoryd_run_control',
    (v) =>
      typeof v.run_id === 'string' &&
      (v.kind === 'followup' || v.kind === 'cancel' || v.kind === 'interrupt'),
  ),
  /** Notification messages may be due now (a resend, an endpoint enabled): dispatchers look at once. */
  notificationsDue: signalChannel('factoryd_notifications_due'),
  /** Some run changed state or got conversation events (coalesced: RunsSignal.changed). */
  runChanged: signalChannel('factoryd_run_changed'),
} as const;
