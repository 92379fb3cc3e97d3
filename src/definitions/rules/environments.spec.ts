import { describe, expect, it } from 'vitest';
import { SchemaRegistry } from '../../common/schema-validator.js';
import { formatError } from '../definition.js';
import { loadDefinition } from '../validate-definition.js';
import { defaultRepositoryPath } from './environments.js';

const schemas = new SchemaRegistry();
const base = {
  'factory.yaml': 'schemaVersion: v1alpha1\nname: acme\n',
  'agents/lead/agent.md': '---\nagentType: FOREMAN\n---\nLead.\n',
};
const errors = (file: string, secrets?: string[]) =>
  loadDefinition(
    new Map(Object.entries({ ...base, 'environments/web.yaml': file })),
    schemas,
    secrets ? { secrets: new Map(secrets.map((s) => [s, { urlSafe: true }])), team: 'default' } : {},
  ).errors.map(formatError);

describe('environments/<name>.yaml', () => {
  it('accepts a full file and fills in each repository folder', () => {
    const file = [
      'dockerImage: debian:bookworm',
      'repositories:',
      '  - url: https://git.example.com/acme/web.git',
      '    branch: main',
      '    credentialSecret: token',
      '  - url: git@git.example.com:acme/shared.git',
      '    ref: v1.2.0',
      'setupCommands: [npm ci]',
      'env: { NODE_ENV: test }',
      'secrets: { NPM_TOKEN: npm }',
    ].join('\n');
    const out = loadDefinition(new Map(Object.entries({ ...base, 'environments/web.yaml': file })), schemas);
    expect(out.errors).toEqual([]);
    expect(out.definition!.environments![0]!.repositories.map((r) => r.path)).toEqual(['web', 'shared']);
    expect(errors(file, ['token', 'npm'])).toEqual([]);
  });

  it('says file:line for each thing wrong', () => {
    const file = [
      'repositories:',
      '  - url: http://git.example.com/a.git', // 2: http refused
      '  - url: https://me:pw@git.example.com/b.git', // 3: a credential in the URL
      '  - url: https://git.example.com/c.git', // 4
      '    branch: main',
      '    ref: abc', // 6: both
      '    path: b', // 7: clashes with b
      'env:',
      '  HOME: /x', // 9: reserved
      'secrets:',
      '  TOKEN: missing', // 11: no such secret
    ].join('\n');
    const found = errors(file, []);
    expect(found).toEqual([
      expect.stringMatching(/^environments\/web\.yaml:2: the transport http:\/\/ is refused/),
      expect.stringMatching(/^environments\/web\.yaml:3: the URL carries a user or a token/),
      expect.stringMatching(/^environments\/web\.yaml:6: give either branch .* or ref .*, not both/),
      expect.stringMatching(/^environments\/web\.yaml:7: repositories 2 and 3 would both be cloned into b/),
      expect.stringMatching(/^environments\/web\.yaml:9: HOME is set by factoryd/),
      expect.stringMatching(/^environments\/web\.yaml:11: secret "missing" does not exist in team default/),
    ]);
  });

  it('names a clone after the last part of its URL', () => {
    expect(defaultRepositoryPath('https://h/acme/web.git')).toBe('web');
    expect(defaultRepositoryPath('git@h:acme/shared')).toBe('shared');
    expect(defaultRepositoryPath('/srv/repos/tools/')).toBe('tools');
  });
});
