import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from './config.js';

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

  const bad: Array<[string, string, RegExp]> = [
    ['PORT', 'eighty', /whole number from 0 to 65535/],
    ['PORT', '65536', /from 0 to 65535/],
    ['PORT', '-1', /whole number/],
    ['FACTORY_POLL_SECONDS', '0', /from 1 to 86400/],
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
