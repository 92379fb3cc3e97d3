import type { Scope } from './api-key.js';

export interface TeamRef {
  id: string;
  uid: string;
  name: string;
}

export interface Principal {
  id: string;
  uid: string;
  type: 'user' | 'service_account';
  displayName: string;
}

/** Who is calling, for which team, with what scopes: resolved once per request by the guard. */
export interface AuthContext {
  keyId: string;
  principal: Principal;
  team: TeamRef;
  scopes: ReadonlySet<Scope>;
  /** A worker key's one worker_host (keys with the `workers` scope only). */
  workerHost?: string;
}
