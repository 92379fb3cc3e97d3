import { Inject, Injectable, Optional } from '@nestjs/common';
import { AuthenticationRequired, InvalidRequest, NotAuthorized } from '../common/problem.js';
import { CONFIG, TEAM_NAME, type Config } from '../config/config.js';
import { generateApiKey, hashApiKey, workerKeyProblem, type Scope } from './api-key.js';
import type { AuthContext, TeamRef } from './auth-context.js';
import { AuthRepository, type KeyRecord } from './auth.repository.js';
import { VerifiedKeys } from './verified-keys.js';

const TOUCH_INTERVAL_MS = 60_000;
/** How long a verified key is trusted without asking the database again (API_KEY_CACHE_SECONDS). */
const DEFAULT_KEY_CACHE_SECONDS = 10;

@Injectable()
export class AuthService {
  /** keyId → last time `last_used_at` was written; keeps that write off most requests. */
  private readonly touched = new Map<string, number>();

  private readonly verified: VerifiedKeys;

  constructor(
    @Inject(AuthRepository) private readonly repo: AuthRepository,
    @Optional() @Inject(CONFIG) config?: Pick<Config, 'apiKeyCacheSeconds'>,
  ) {
    this.verified = new VerifiedKeys((config?.apiKeyCacheSeconds ?? DEFAULT_KEY_CACHE_SECONDS) * 1000);
  }

  /** Resolves `Authorization: Bearer <key>` and `X-Team-Uid` to the caller, or throws 401/403/400. */
  async authenticate(authorization: string | undefined, teamUid: string | undefined): Promise<AuthContext> {
    const record = await this.keyOf(authorization);
    const team = this.selectTeam(record.teams, teamUid);
    this.touch(record.keyId);
    return {
      keyId: record.keyId,
      principal: record.principal,
      team,
      scopes: new Set(record.scopes),
      ...(record.workerHost ? { workerHost: record.workerHost } : {}),
    };
  }

  /** The key in `Authorization: Bearer <key>` with its principal, scopes and every team; or 401. */
  async keyOf(authorization: string | undefined): Promise<KeyRecord> {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '');
    if (!match) throw new AuthenticationRequired();
    const record = await this.verifiedKey(hashApiKey(match[1]));
    if (!record) throw new AuthenticationRequired('The API key is not valid (unknown or revoked).');
    return record;
  }

  /** The live key with this hash: from the cache of verified keys, else from the database. */
  private async verifiedKey(hash: Buffer): Promise<KeyRecord | undefined> {
    const cached = this.verified.get(hash);
    if (cached) return cached;
    const record = await this.repo.findKeyByHash(hash);
    if (record) this.verified.set(hash, record);
    return record;
  }

  private selectTeam(teams: TeamRef[], teamUid: string | undefined): TeamRef {
    if (teamUid !== undefined) {
      const team = teams.find((t) => t.uid === teamUid);
      if (!team) throw new NotAuthorized(`This API key is not a member of team ${teamUid}.`);
      return team;
    }
    if (teams.length === 1) return teams[0];
    if (teams.length === 0) throw new NotAuthorized('This API key belongs to no team.');
    throw new InvalidRequest(
      `This API key belongs to several teams (${teams.map((t) => `${t.name}: ${t.uid}`).join(', ')}); send X-Team-Uid to pick one.`,
    );
  }

  private touch(keyId: string): void {
    const now = Date.now();
    if ((this.touched.get(keyId) ?? 0) > now - TOUCH_INTERVAL_MS) return;
    this.touched.set(keyId, now);
    void this.repo.touchKey(keyId).catch(() => this.touched.delete(keyId));
  }

  async createTeam(name: string): Promise<TeamRef> {
    if (!TEAM_NAME.test(name)) {
      throw new InvalidRequest(
        'team name must be 1-63 characters of a-z, 0-9 and -, starting with a letter or digit',
      );
    }
    const team = await this.repo.createTeam(name);
    if (!team) throw new InvalidRequest(`a team named ${name} exists already`);
    return team;
  }

  /**
   * Creates a principal in `teams` with one key; the key is returned once and stored only hashed. A
   * worker key (scope `workers`) serves one `workerHost` of one team.
   */
  async createApiKey(input: {
    teams: TeamRef[];
    scopes: Scope[];
    name: string;
    type?: 'user' | 'service_account';
    workerHost?: string;
  }): Promise<{ id: string; key: string; prefix: string; principalUid: string }> {
    const problem = workerKeyProblem(input.scopes, input.workerHost);
    if (problem) throw new InvalidRequest(problem);
    if (input.workerHost !== undefined && input.teams.length !== 1)
      throw new InvalidRequest('a worker key serves one team: give --team once');
    const generated = generateApiKey();
    const { keyId, principalUid } = await this.repo.createPrincipalWithKey({
      type: input.type ?? 'service_account',
      displayName: input.name,
      teamIds: input.teams.map((t) => t.id),
      keyName: input.name,
      prefix: generated.prefix,
      hash: generated.hash,
      scopes: input.scopes,
      workerHost: input.workerHost,
    });
    return { id: keyId, key: generated.key, prefix: generated.prefix, principalUid };
  }
}

/**
 * The team a request selects: `X-Team-Uid`, else `X-Warp-Team-Uid`, the header the Oz clients send for
 * their `team_uid` parameter.
 */
export function teamHeader(headers: Record<string, string | string[] | undefined>): string | undefined {
  const team = headers['x-team-uid'] ?? headers['x-warp-team-uid'];
  return Array.isArray(team) ? team[0] : team;
}
