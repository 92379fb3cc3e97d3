import { describe, expect, it } from 'vitest';
import { isRemote } from './repository-policy.js';

describe('isRemote: which repository URLs git may fetch', () => {
  it.each([
    'https://github.com/acme/factory.git',
    'ssh://git@github.com/acme/factory.git',
    'git://127.0.0.1:9418/factory',
    'git@github.com:acme/factory.git',
    'host.example:factory.git',
  ])('%s is a remote over an allowed transport', (url) => expect(isRemote(url)).toBe(true));

  it.each(['/srv/factories/acme', './factory', 'factory', '../a:b'])('%s is a local path', (path) =>
    expect(isRemote(path)).toBe(false),
  );

  it.each([
    ['file:///srv/acme', /file:\/\/ URLs are refused/],
    ['FILE:///srv/acme', /file:\/\/ URLs are refused/],
    ['ext::sh -c id', /the git transport "ext::" is refused/],
    ['fd::3', /the git transport "fd::" is refused/],
    ['http://example.com/a.git', /the transport http:\/\/ is refused/],
    ['ftp://example.com/a.git', /the transport ftp:\/\/ is refused/],
    ['ssh://-oProxyCommand=id/a', /no valid host/],
    ['-oProxyCommand=id:a', /starts with "-"/],
  ])('%s is refused', (url, message) => expect(() => isRemote(url)).toThrow(message));
});
