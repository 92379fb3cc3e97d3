import { describe, expect, it } from 'vitest';
import { harnessEnvironment, harnessSpawn } from './sandbox.js';

describe('harnessEnvironment', () => {
  const service = {
    PATH: '/usr/bin:/bin',
    LANG: 'C.UTF-8',
    HOME: '/root',
    DATABASE_URL: 'postgres://u:p@db/f',
    SECRETS_KEY: 'k',
    ANTHROPIC_API_KEY: 'sk-ant',
    OPENAI_API_KEY: 'sk-oai',
  };

  it('takes the basics and the allowed names only, with HOME in the workspace and the run variables', () => {
    expect(harnessEnvironment({ FACTORYD_RUN_ID: 'r1' }, '/w/r1-1', ['ANTHROPIC_API_KEY'], service)).toEqual({
      PATH: '/usr/bin:/bin',
      LANG: 'C.UTF-8',
      ANTHROPIC_API_KEY: 'sk-ant',
      HOME: '/w/r1-1',
      FACTORYD_RUN_ID: 'r1',
    });
  });

  it('gives nothing the service has not got', () => {
    expect(harnessEnvironment({}, '/w', ['MISSING'], {})).toEqual({ HOME: '/w' });
  });
});

describe('harnessSpawn', () => {
  it('runs the command line through the shell, in bwrap with the workspace bound at its own path last', () => {
    expect(harnessSpawn({ mode: 'none' }, 'echo hi', '/w/x')).toEqual({
      file: '/bin/sh',
      args: ['-c', 'echo hi'],
    });
    const { file, args, uid } = harnessSpawn(
      {
        mode: 'bwrap',
        bwrap: '/usr/bin/bwrap',
        uid: 65534,
        gid: 65534,
        mounts: ['--tmpfs', '/data'],
        hidden: ['/', '/data'], // every socket hidden: the arguments do not depend on this machine's
      },
      'echo hi',
      '/data/w/x',
    );
    expect(file).toBe('/usr/bin/bwrap');
    expect(uid).toBe(65534);
    expect(args.join(' ')).toMatch(
      /^--tmpfs \/data --bind \/data\/w\/x \/data\/w\/x --chdir \/data\/w\/x .*--unshare-pid.*--unshare-net.*--die-with-parent --new-session -- \/bin\/sh -c echo hi$/,
    );
  });
});
