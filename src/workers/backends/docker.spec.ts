import { describe, expect, it } from 'vitest';
import { containerName, dockerRunArgs, type DockerSandbox } from './docker.js';

const sandbox: DockerSandbox = {
  mode: 'docker',
  docker: '/usr/bin/docker',
  image: 'worker-default:1',
  uid: 65534,
  gid: 65534,
  cpus: '2',
  memory: '4g',
  pids: 1024,
  network: 'none',
  keepFailedSeconds: 3600,
  readOnly: ['/opt/tools'],
};
const run = {
  command: 'node agent.js',
  cwd: '/w/worker-1/run-7-1',
  env: { HOME: '/w/worker-1/run-7-1', API_KEY: 'sk-secret' },
};
const valueOf = (args: string[], flag: string) => args.filter((_, i) => args[i - 1] === flag);

describe('dockerRunArgs', () => {
  it("runs the worker's image with no network, the limits, the workspace, variables by name only", () => {
    const args = dockerRunArgs(sandbox, run, 'host/1/2');
    expect(args.slice(-4)).toEqual(['worker-default:1', '/bin/sh', '-c', 'node agent.js']);
    expect(valueOf(args, '--network')).toEqual(['none']);
    expect(valueOf(args, '--user')).toEqual(['65534:65534']);
    expect(valueOf(args, '--pids-limit')).toEqual(['1024']);
    expect(valueOf(args, '--memory-swap')).toEqual(['4g']);
    expect(valueOf(args, '--volume')).toContain('/w/worker-1/run-7-1:/w/worker-1/run-7-1:rw');
    expect(valueOf(args, '--volume')).toContain('/opt/tools:/opt/tools:ro');
    expect(valueOf(args, '--env')).toEqual(expect.arrayContaining(['HOME', 'API_KEY']));
    expect(args.join(' ')).not.toContain('sk-secret');
    expect(args.join(' ')).not.toMatch(/docker\.sock|--privileged/);
    expect(valueOf(args, '--name')).toEqual([containerName(run.cwd)]);
  });

  it("takes the environment's image and network", () => {
    const args = dockerRunArgs(sandbox, { ...run, placement: { image: 'team/img:2', network: 'bridge' } });
    expect(args.at(-4)).toBe('team/img:2');
    expect(valueOf(args, '--network')).toEqual(['bridge']);
  });

  it('refuses an image or network a team could turn into an option of docker run', () => {
    for (const image of ['--privileged', '-v/:/host', 'a b', ''])
      expect(() => dockerRunArgs(sandbox, { ...run, placement: { image } })).toThrow(
        /not a Docker image reference/,
      );
    expect(() => dockerRunArgs(sandbox, { ...run, placement: { network: 'host' as 'none' } })).toThrow(
      /network must be one of none, bridge/,
    );
  });

  it('binds the egress proxy socket when there is one (the seam for a `none` network)', () => {
    const args = dockerRunArgs({ ...sandbox, egressSocket: '/run/factoryd/egress/w1.sock' }, run);
    expect(valueOf(args, '--volume')).toContain('/run/factoryd/egress/w1.sock:/run/factoryd/egress.sock');
  });
});
