import { describe, expect, it } from 'vitest';
import { repositoryOf } from './factory.presenter.js';

describe('a factory.yaml repository as the clients’ Repository', () => {
  it('reads owner, repo and forge from owner/repo and clone URLs', () => {
    expect(
      [
        'acme/web',
        'https://github.com/acme/api.git',
        'git@github.com:acme/api.git',
        'https://gitlab.com/group/sub/repo',
        'ssh://git@gitlab.example.com:2222/a/b.git',
        'https://dev.azure.com/org/proj/_git/repo',
        'https://git.example.com/team/tool.git',
        '/srv/repos/tool',
      ].map(repositoryOf),
    ).toEqual([
      { owner: 'acme', repo: 'web', code_forge: 'GITHUB' },
      { owner: 'acme', repo: 'api', code_forge: 'GITHUB' },
      { owner: 'acme', repo: 'api', code_forge: 'GITHUB' },
      { owner: 'group/sub', repo: 'repo', code_forge: 'GITLAB' },
      { owner: 'a', repo: 'b', code_forge: 'GITLAB' },
      { owner: 'org/proj/_git', repo: 'repo', code_forge: 'AZURE_DEVOPS' },
      { owner: 'team', repo: 'tool' },
      { owner: '/srv/repos', repo: 'tool' },
    ]);
  });
});
