import { PROVIDER_BASE_URL_VARIABLES } from '../common/egress-policy.js';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, SERVICE_VARIABLES } from './config.js';

describe('loadConfig', () => {
  it('has working defaults', () => {
    const c = loadConfig({});
    expect(c).toMatchObject({ port: 8080, host: '127.0.0.1', factoryBranch: 'main', logLevel: 'info' });
    expect(c.databaseUrl).toBeUndefined();
    expect(c.dataDir).toMatch(/var$/);
    expect(c.idleMinuteMs).toBe(60_000);
    expect(c).toMatchObject({ runIdleTimeoutMinutes: 15, runMaxDurationMinutes: 240 });
    expect(c.teamMaxSlots).toBeUndefined();
    expect(loadConfig({ TEAM_MAX_SLOTS: '3', RUN_MAX_DURATION_MINUTES: '0' })).toMatchObject({
      teamMaxSlots: 3,
      runMaxDurationMinutes: 0,
    });
    expect(c).toMatchObject({
      httpHeadersTimeoutMs: 10_000,
      httpRequestTimeoutMs: 30_000,
      httpKeepAliveTimeoutMs: 72_000,
    });
    expect(c.gitTimeoutSeconds).toBe(60);
    expect(c.factoryRepoRoots).toEqual([]);
  });

  it('counts every variable it reads as the service’s own, never passed to a harness', () => {
    const read = new Set<string>();
    loadConfig(new Proxy({}, { get: (_, name) => void read.add(String(name)) }));
    // The providers' base URLs are read to trust them in the egress proxy; they are the harnesses' own.
    const outside = [...read].filter((name) => !SERVICE_VARIABLES.includes(name));
    expect(outside).toEqual(PROVIDER_BASE_URL_VARIABLES);
  });

  it('reads FACTORY_REPO_ROOTS as absolute folders separated by ":", each shared or bound to a team', () => {
    expect(
      loadConfig({ FACTORY_REPO_ROOTS: '/srv/factories:acme=/home/ci/repos/:ops-2=/srv/ops' })
        .factoryRepoRoots,
    ).toEqual([
      { folder: '/srv/factories' },
      { folder: '/home/ci/repos', team: 'acme' },
      { folder: '/srv/ops', team: 'ops-2' },
    ]);
  });

  it('reads good values', () => {
    const key = Buffer.alloc(32, 7).toString('base64');
    const c = loadConfig({
      PORT: '9000',
      DATABASE_URL: 'postgres://u:p@db:5432/f/',
      FACTORY_POLL_SECONDS: '30',
      SECRETS_KEY: key,
      PUBLIC_BASE_URL: 'https://factory.example/',
      LOG_LEVEL: 'debug',
      FACTORY_BRANCH: 'release/v1',
    });
    expect(c).toMatchObject({
      port: 9000,
      databaseUrl: 'postgres://u:p@db:5432/f',
      factoryPollSeconds: 30,
      publicBaseUrl: 'https://factory.example',
      logLevel: 'debug',
      factoryBranch: 'release/v1',
    });
    expect(c.secretsKey?.equals(Buffer.alloc(32, 7))).toBe(true);
  });

  it('reads the worker backend and the Docker settings, with their defaults', () => {
    expect(loadConfig({})).toMatchObject({
      workerBackend: 'host',
      docker: {
        image: 'debian:bookworm-slim',
        cpus: '2',
        memory: '4g',
        pids: 1024,
        network: 'none',
        bridgeEnvironments: [],
        keepFailedSeconds: 3600,
        mounts: [],
      },
    });
    expect(
      loadConfig({
        WORKER_BACKEND: 'docker',
        WORKER_DOCKER_IMAGE: 'registry.example.com:5000/team/tools:3',
        WORKER_DOCKER_CPUS: '0.5',
        WORKER_DOCKER_MEMORY: '512M',
        WORKER_DOCKER_PIDS: '64',
        WORKER_DOCKER_NETWORK: 'bridge',
        WORKER_DOCKER_KEEP_FAILED_SECONDS: '0',
        WORKER_DOCKER_MOUNTS: '/opt/claude:/opt/tools',
        WORKER_DOCKER_BRIDGE_ENVIRONMENTS: 'acme:build, acme:release.v2,ops-2:Tools_1',
      }),
    ).toMatchObject({
      workerBackend: 'docker',
      docker: {
        image: 'registry.example.com:5000/team/tools:3',
        cpus: '0.5',
        memory: '512m',
        pids: 64,
        network: 'bridge',
        bridgeEnvironments: [
          { team: 'acme', environment: 'build' },
          { team: 'acme', environment: 'release.v2' },
          { team: 'ops-2', environment: 'Tools_1' },
        ],
        keepFailedSeconds: 0,
        mounts: ['/opt/claude', '/opt/tools'],
      },
    });
  });

  it('refuses bad Docker settings, naming the variable', () => {
    const bad: Array<[Record<string, string>, RegExp]> = [
      [{ WORKER_BACKEND: 'dockr' }, /^WORKER_BACKEND: must be one of host, docker, got "dockr"/],
      [
        { WORKER_DOCKER_IMAGE: '--privileged' },
        /^WORKER_DOCKER_IMAGE: "--privileged" is not a Docker image reference/,
      ],
      [{ WORKER_DOCKER_CPUS: '0' }, /^WORKER_DOCKER_CPUS: must be a number of CPUs above 0/],
      [{ WORKER_DOCKER_MEMORY: '1m' }, /^WORKER_DOCKER_MEMORY: must be a size of at least 6m/],
      [{ WORKER_DOCKER_MEMORY: 'lots' }, /^WORKER_DOCKER_MEMORY: must be a size/],
      [{ WORKER_DOCKER_NETWORK: 'host' }, /^WORKER_DOCKER_NETWORK: must be one of none, bridge/],
      [
        { WORKER_DOCKER_MOUNTS: '/opt/x:/var/run/docker.sock' },
        /^WORKER_DOCKER_MOUNTS: \/var\/run\/docker\.sock would give/,
      ],
      [{ WORKER_DOCKER_MOUNTS: '/' }, /^WORKER_DOCKER_MOUNTS: \/ would give/],
      ...['build', 'acme', 'Acme:build', 'acme:', ':build', 'acme:-x', 'acme:a b', 'acme:a:b'].map(
        (entry): [Record<string, string>, RegExp] => [
          { WORKER_DOCKER_BRIDGE_ENVIRONMENTS: `ok:fine,${entry}` },
          /^WORKER_DOCKER_BRIDGE_ENVIRONMENTS: ".*" is not TEAM:ENVIRONMENT/,
        ],
      ),
    ];
    for (const [env, message] of bad) expect(() => loadConfig(env)).toThrow(message);
  });

  it('reads the harness sandbox settings', () => {
    const c = loadConfig({
      HARNESS_SANDBOX: 'user',
      HARNESS_ENV_ALLOW: ' ANTHROPIC_API_KEY, OPENAI_API_KEY ',
      HARNESS_UID: '1500:1600',
      HARNESS_UIDS: '300000-300099',
    });
    expect(c).toMatchObject({
      harnessSandbox: 'user',
      harnessEnvAllow: ['ANTHROPIC_API_KEY', 'OPENAI_API_KEY'],
      harnessUser: { uid: 1500, gid: 1600 },
      harnessUids: { first: 300000, last: 300099 },
    });
    expect(loadConfig({})).toMatchObject({
      harnessSandbox: undefined,
      harnessEnvAllow: [],
      harnessUser: { uid: 65534 },
    });
  });

  it('reads the egress policy: the defaults, HARNESS_EGRESS_ALLOW and the providers’ base URLs', () => {
    const c = loadConfig({
      HARNESS_EGRESS_ALLOW: '*.corp.example, git.corp.example:8443',
      ANTHROPIC_BASE_URL: 'http://127.0.0.1:4567/v1',
      OPENAI_BASE_URL: 'https://gateway.internal',
      HARNESS_EGRESS_TRUST: 'http://10.1.2.3:3000/git',
    });
    expect(c.harnessEgress?.rules).toEqual(
      expect.arrayContaining([
        { host: 'api.anthropic.com', port: undefined },
        { host: '*.corp.example', port: undefined },
        { host: 'git.corp.example', port: 8443 },
      ]),
    );
    expect(c.harnessEgress?.trusted).toEqual([
      { host: '127.0.0.1', port: 4567 },
      { host: 'gateway.internal', port: 443 },
      { host: '10.1.2.3', port: 3000 },
    ]);
    expect(loadConfig({ HARNESS_EGRESS_ALLOW: 'none' }).harnessEgress).toBeUndefined();
  });

  const bad: Array<[string, string, RegExp]> = [
    ['HARNESS_EGRESS_ALLOW', 'ok.example,http://x', /"http:\/\/x" is not a host, \*\.domain or \*/],
    ['ANTHROPIC_BASE_URL', 'ftp://x', /must be an http:\/\/ or https:\/\/ URL/],
    ['HARNESS_EGRESS_TRUST', 'git.internal', /"git.internal" is not an http:\/\/ or https:\/\/ URL/],
    ['PORT', 'eighty', /whole number from 0 to 65535/],
    [
      'FACTORY_REPO_ROOTS',
      '/srv/ok:repos',
      /must list absolute folders \(or TEAM=\/folder\) separated by ":", got "repos"/,
    ],
    ['FACTORY_REPO_ROOTS', 'acme=repos', /got "acme=repos"/],
    ['FACTORY_REPO_ROOTS', 'Acme Ops=/srv/x', /"Acme Ops" in "Acme Ops=\/srv\/x" is not a team name/],
    ['PORT', '65536', /from 0 to 65535/],
    ['PORT', '-1', /whole number/],
    ['FACTORY_POLL_SECONDS', '0', /from 1 to 86400/],
    ['GIT_TIMEOUT_SECONDS', '0', /from 1 to 3600/],
    ['REPOSITORY_CACHE_DAYS', 'two weeks', /whole number from 0 to 3650/],
    ['DATABASE_URL', 'mysql://x@y/z', /must start with postgres:\/\//],
    ['DATABASE_URL', 'not a url', /not a valid URL/],
    ['PUBLIC_BASE_URL', 'ftp://x', /must start with http:\/\/ or https:\/\//],
    ['WEBHOOK_BASE_URL', '::', /not a valid URL/],
    ['REDIS_URL', 'http://r', /redis:\/\//],
    ['LOG_LEVEL', 'loud', /must be one of fatal, error/],
    ['FACTORY_BRANCH', '-main', /not a valid git branch name/],
    ['FACTORY_BRANCH', 'a..b', /not a valid git branch name/],
    ['SECRETS_KEY', 'c2hvcnQ=', /32 bytes encoded as base64/],
    ['IDLE_TIMEOUT_MINUTE_MS', '90000', /from 100 to 60000/],
    ['IDLE_TIMEOUT_MINUTE_MS', '1.5', /whole number/],
    ['HARNESS_SANDBOX', 'docker', /must be one of bwrap, user, none/],
    [
      'HARNESS_ENV_ALLOW',
      'ANTHROPIC_API_KEY,DATABASE_URL',
      /DATABASE_URL is the service's own configuration/,
    ],
    ['HARNESS_ENV_ALLOW', 'SECRETS_KEY', /SECRETS_KEY is the service's own/],
    ['HARNESS_ENV_ALLOW', 'FACTORYD_API_KEY', /FACTORYD_API_KEY is the service's own/],
    ['HARNESS_ENV_ALLOW', 'PGPASSWORD', /never goes to a harness/],
    ['HARNESS_ENV_ALLOW', 'A-B', /not a variable name/],
    ['HARNESS_UID', '0', /other than 0/],
    ['HARNESS_UID', 'nobody', /uid or uid:gid/],
    ['HARNESS_UIDS', '5-1', /FIRST-LAST/],
    ['HTTP_REQUEST_TIMEOUT_MS', 'soon', /whole number/],
    // Node refuses a headers timeout above the request timeout (30 s by default).
    ['HTTP_HEADERS_TIMEOUT_MS', '40000', /from 100 to 30000/],
    ['HTTP_KEEP_ALIVE_TIMEOUT_MS', '10', /from 1000 to 600000/],
    ['RUN_IDLE_TIMEOUT_MINUTES', 'soon', /whole number from 0 to 1440/],
    ['RUN_MAX_DURATION_MINUTES', '20000', /from 0 to 10080/],
    ['TEAM_MAX_SLOTS', '0', /from 1 to 10000/],
  ];
  it.each(bad)('rejects %s=%s with a ConfigError naming it', (name, value, reason) => {
    let err: unknown;
    try {
      loadConfig({ [name]: value });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).variable).toBe(name);
    expect((err as ConfigError).message).toMatch(new RegExp(`^${name}: `));
    expect((err as ConfigError).message).toMatch(reason);
    expect((err as ConfigError).message).not.toContain('\n');
  });

  it('never echoes a URL that may hold a password', () => {
    expect(() => loadConfig({ DATABASE_URL: 'postgres//user:hunter2@db' })).toThrow(/^(?!.*hunter2)/);
  });
});
