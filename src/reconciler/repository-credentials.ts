import type { SecretsService } from '../secrets/secrets.service.js';
import type { DefinitionStore } from './definition-store.js';
import { RepositoryRefused } from '../git/repository-url.js';

import type { GitCredentials } from '../git/git-runner.js';

/**
 * The team secret that holds the credentials of a factory's repository: its value is
 * `USERNAME:PASSWORD` (or a token alone, taken as the username, as in `https://TOKEN@host/…`).
 */
function credentialsSecretName(factoryName: string): string {
  return `git-credentials-${factoryName}`;
}

export function credentialsOf(secretValue: string): GitCredentials {
  const colon = secretValue.indexOf(':');
  return colon < 0
    ? { username: secretValue, password: '' }
    : { username: secretValue.slice(0, colon), password: secretValue.slice(colon + 1) };
}

/**
 * A repository URL's credentials (`https://USER:PASSWORD@host/…`) and the URL without them;
 * undefined when it carries none. Credentials never stay in a URL: git would show them on its
 * command line (readable in `ps` by every user of the machine) and the database would hold them in
 * clear. An ssh:// URL keeps its user name (no secret: ssh authenticates with a key) and may hold
 * no password.
 */
export function splitCredentials(repoUrl: string): { url: string; secretValue: string } | undefined {
  let url: URL;
  try {
    url = new URL(repoUrl);
  } catch {
    return undefined; // a local path or user@host:path, which carry no password
  }
  if (!url.username && !url.password) return undefined;
  if (url.protocol === 'ssh:') {
    if (!url.password) return undefined;
    throw new RepositoryRefused(
      'an ssh:// URL may hold no password (factoryd runs ssh in batch mode): give ssh a key (GIT_SSH_COMMAND or ~/.ssh), or use https:// with credentials',
    );
  }
  const username = decodeURIComponent(url.username);
  const password = decodeURIComponent(url.password);
  url.username = '';
  url.password = '';
  return { url: url.toString(), secretValue: password ? `${username}:${password}` : username };
}

/** The URL as it is shown and compared: without credentials. */
export function withoutCredentials(repoUrl: string): string {
  try {
    return splitCredentials(repoUrl)?.url ?? repoUrl;
  } catch {
    return repoUrl;
  }
}

/**
 * Keeps `secretValue` (split from the factory's URL) as the team secret of its credentials, encrypted
 * like every secret, and leaves the factory's row with the URL alone; returns the secret's name.
 */
export async function keepCredentials(
  deps: {
    store: Pick<DefinitionStore, 'setRepositoryCredentials'>;
    secrets: Pick<SecretsService, 'set'>;
  },
  factory: { id: string; teamId: string; name: string },
  split: { url: string; secretValue: string },
): Promise<string> {
  const name = credentialsSecretName(factory.name);
  await deps.secrets.set(factory.teamId, name, split.secretValue);
  await deps.store.setRepositoryCredentials(factory.id, split.url, name);
  return name;
}
