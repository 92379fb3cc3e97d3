import { CALLER_SCOPES } from './api-key.js';
import type { AuthRepository } from './auth.repository.js';
import type { AuthService } from './auth.service.js';

/**
 * First start: the team `default` and an admin key with every scope but `workers` (a worker key is a
 * machine's, bound to its host). Returns the key only when it was
 * just created, so it is shown once; later starts find teams and return undefined.
 */
export async function bootstrapDefaultTeam(
  repo: AuthRepository,
  auth: AuthService,
): Promise<string | undefined> {
  if ((await repo.listTeams()).length > 0) return undefined;
  const team = await repo.createTeam('default');
  if (!team) return undefined; // another replica won the race
  const { key } = await auth.createApiKey({
    teams: [team],
    scopes: [...CALLER_SCOPES],
    name: 'admin',
    type: 'user',
  });
  return key;
}
