import { mkdirSync, mkdtempSync, renameSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import { DefinitionStore } from '../../src/reconciler/definition-store.js';
import { Reconciler } from '../../src/reconciler/reconciler.js';
import { TestRepo } from '../support/git-repo.js';
import type { TestService } from '../support/service.js';

/**
 * The headers the official Python client (oz-agent-sdk 0.11.0, `_base_client.py`) sends on every
 * request, GET and DELETE included: JSON content type with or without a body, its user agent and the
 * Stainless platform headers.
 */
export const PYTHON_HEADERS: Record<string, string> = {
  accept: 'application/json',
  'content-type': 'application/json',
  'user-agent': 'OzAPI/Python 0.11.0',
  'x-stainless-lang': 'python',
  'x-stainless-package-version': '0.11.0',
  'x-stainless-os': 'Linux',
  'x-stainless-arch': 'x64',
  'x-stainless-runtime': 'CPython',
  'x-stainless-runtime-version': '3.12.3',
  'x-stainless-async': 'false',
  'x-stainless-retry-count': '0',
  'x-stainless-read-timeout': '60.0',
};

/**
 * The headers the official TypeScript client (oz-agent-sdk, `src/client.ts` and
 * `internal/detect-platform.ts`) sends on every request; a body adds its JSON content type.
 */
export const TYPESCRIPT_HEADERS: Record<string, string> = {
  accept: 'application/json',
  'user-agent': 'OzAPI/JS 1.4.0-alpha.6',
  'x-stainless-lang': 'js',
  'x-stainless-package-version': '1.4.0-alpha.6',
  'x-stainless-os': 'Linux',
  'x-stainless-arch': 'x64',
  'x-stainless-runtime': 'node',
  'x-stainless-runtime-version': 'v20.19.0',
  'x-stainless-retry-count': '0',
  'x-stainless-timeout': '600',
};

export interface WireResponse {
  status: number;
  body: any;
  headers: Headers;
  /** The body as sent (what a client that does not parse JSON gets). */
  text: string;
}

type ClientRequest = (
  t: TestService,
  method: string,
  path: string,
  body?: unknown,
  key?: string | null,
  extra?: Record<string, string>,
) => Promise<WireResponse>;

/** Requests with a client's headers, a JSON body or none at all, the key as a bearer token. */
function client(headers: Record<string, string>): ClientRequest {
  return async (t, method, path, body, key = t.adminKey, extra = {}) => {
    const res = await fetch(`${t.api}${path}`, {
      method,
      redirect: 'manual',
      headers: {
        ...headers,
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        ...(key ? { authorization: `Bearer ${key}` } : {}),
        ...extra,
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    const json = res.headers.get('content-type')?.includes('json');
    return {
      status: res.status,
      body: text && json ? JSON.parse(text) : text || undefined,
      headers: res.headers,
      text,
    };
  };
}

/** A request as the Python client makes it: its headers (JSON content type even without a body). */
export const python = client(PYTHON_HEADERS);

/** A request as the newest TypeScript client makes it. */
export const typescript = client(TYPESCRIPT_HEADERS);

/**
 * A factory `acme` from a repository at …/acme/factory (owner/repo `acme/factory`), applied: an
 * environment in its agentDefaults, a foreman, an agent with its own model, and a skill.
 */
export async function acmeFactory(t: TestService): Promise<{ uid: string; folder: string }> {
  const repo = new TestRepo();
  repo.commit({
    'factory.yaml': 'schemaVersion: v1alpha1\nname: acme\nagentDefaults:\n  environmentId: env-acme\n',
    'agents/lead/agent.md': '---\nagentType: FOREMAN\ndescription: Leads\n---\nYou lead.\n',
    'agents/fixer/agent.md': '---\ndescription: Fixes\noverrides:\n  model: fixer-model\n---\nYou fix.\n',
    'skills/triage/SKILL.md': '---\nname: triage\ndescription: Labels issues\n---\nLabel the issue.\n',
  });
  const folder = mkdtempSync(join(tmpdir(), 'factoryd-oz-wire-'));
  mkdirSync(join(folder, 'acme'));
  renameSync(repo.dir, join(folder, 'acme', 'factory'));
  const factory = await t.service.app.get(DefinitionStore).register({
    teamId: t.defaultTeam.id,
    name: 'acme',
    repoUrl: join(folder, 'acme', 'factory'),
    branch: 'main',
  });
  const applied = await t.service.app.get(Reconciler).request(factory!.id);
  expect(applied.errors).toEqual([]);
  const [row] = await t.service.db.query<{ uid: string }>(`SELECT uid FROM factories WHERE id = $1`, [
    factory!.id,
  ]);
  return { uid: row!.uid, folder };
}
