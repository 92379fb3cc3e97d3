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
/** The command as the container's shell gets it: a word on an unwritable /tmp first (docker.ts). */
const withTmpCheck = (command: string) =>
  expect.stringMatching(
    new RegExp(`^\\[ -w /tmp \\] \\|\\| echo "factoryd: /tmp is not writable.*; ${command}$`),
  );
const valueOf = (args: string[], flag: string) => args.filter((_, i) => args[i - 1] === flag);

describe('dockerRunArgs', () => {
  it("runs the worker's image with no network, the limits, the workspace, variables by name only", () => {
    const args = dockerRunArgs(sandbox, run, 'host/1/2');
    expect(args.slice(-4)).toEqual(['worker-default:1', '/bin/sh', '-c', withTmpCheck('node agent.js')]);
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

  it("puts a `none` container's command under the forwarder, with the run's socket; never a `bridge` one's", () => {
    const egress = {
      socket: '/var/lib/factoryd/egress/w1/7.sock',
      forwarder: ['/usr/bin/perl', '/opt/f/egress-forwarder.pl', '/run/factoryd/egress.sock', '3128', '--'],
    };
    const args = dockerRunArgs(sandbox, { ...run, egress });
    expect(valueOf(args, '--volume')).toContain(
      '/var/lib/factoryd/egress/w1/7.sock:/run/factoryd/egress.sock',
    );
    expect(valueOf(args, '--volume')).toContain('/opt/f/egress-forwarder.pl:/opt/f/egress-forwarder.pl:ro');
    const command = args.slice(args.indexOf('worker-default:1') + 1);
    // The image's perl (not the host's path) runs the forwarder, then the command as without it.
    expect(command.slice(0, 2)).toEqual(['/bin/sh', '-c']);
    expect(command[2]).toMatch(/exec perl "\$@"/);
    expect(command.slice(3)).toEqual([
      'factoryd-egress',
      '/opt/f/egress-forwarder.pl',
      '/run/factoryd/egress.sock',
      '3128',
      '--',
      '/bin/sh',
      '-c',
      withTmpCheck('node agent.js'),
    ]);
    const bridged = dockerRunArgs(sandbox, { ...run, egress, placement: { network: 'bridge' } });
    expect(bridged.slice(-4)).toEqual(['worker-default:1', '/bin/sh', '-c', withTmpCheck('node agent.js')]);
    expect(bridged.join(' ')).not.toContain('egress');
  });
});
