import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { fromRoot } from '../src/common/paths.js';
import { ManagedFactories } from '../src/management/managed-factories.js';
import { SecretsService } from '../src/secrets/secrets.service.js';
import { artifactText } from './support/artifacts.js';
import { eventually } from './support/eventually.js';
import { testCli, TEST_HARNESSES_DIR } from './support/harness-clis.js';
import { startAnthropicStub, workingDirectory } from './support/model-stubs/anthropic.js';
import { startOpenAIResponsesStub } from './support/model-stubs/openai-responses.js';
import {
  containersNamed,
  dockerUnavailable,
  imageWithRootOnlyTmp,
  localImage,
  // @ts-expect-error plain JS shared with bench/
} from './support/local-image.js';
import { runIn, startTestService, type TestService } from './support/service.js';

// The Docker backend on the real Engine: self-hosted `factoryd worker --backend docker` processes
// (built code) against the test service, in an image made here from the machine's own files.
const unavailable: string | undefined = dockerUnavailable();
if (unavailable) console.warn(`docker-backend tests skipped: ${unavailable}`);

const FIXTURES = fromRoot('test', 'fixtures', 'docker');
let t: TestService;
let image: string;
const children: ChildProcess[] = [];
const dataDir = mkdtempSync(join(tmpdir(), 'factoryd-docker-test-'));

beforeAll(async () => {
  if (unavailable) return;
  image = localImage();
  t = await startTestService({ WORKER_LEASE_SECONDS: '3' });
});
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});
afterAll(async () => {
  await t?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

/** A self-hosted worker for `host` (with its key); with `host` undefined, a service-hosted one on the database. */
function worker(
  host: string | undefined,
  key: string,
  env: Record<string, string> = {},
): ChildProcess & { output(): string } {
  const where = host ? ['--worker-host', host, '--api', t.api] : [];
  const child = spawn(
    process.execPath,
    [fromRoot('dist/cli/main.js'), 'worker', '--backend', 'docker', ...where],
    {
      env: {
        ...process.env,
        FACTORYD_API_KEY: key,
        LOG_LEVEL: 'silent',
        TMPDIR: dataDir,
        DATA_DIR: dataDir,
        ...(host ? {} : { DATABASE_URL: t.service.databaseServer.url }),
        WORKER_DOCKER_IMAGE: image,
        WORKER_DOCKER_KEEP_FAILED_SECONDS: '0',
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  ) as ChildProcess & { output(): string };
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  child.output = () => out;
  children.push(child);
  return child;
}

async function create(
  prompt: string,
  host: string | undefined,
  config: Record<string, unknown> = {},
): Promise<string> {
  const res = await t.call('POST', '/api/v1/agent/runs', {
    prompt,
    config: host ? { worker_host: host, ...config } : config,
  });
  expect(res.status).toBe(200);
  return res.body.run_id;
}

// A run here is several `docker run`s (setup commands each get their own container): on a loaded
// machine that is more than the default 20 s, so a run's end gets a minute.
const ended = (id: string) =>
  runIn(t, id, ['SUCCEEDED', 'FAILED', 'ERROR', 'CANCELLED'], undefined, { timeoutMs: 60_000 });
const messages = async (id: string): Promise<string[]> =>
  (await t.call('GET', `/api/v1/agent/runs/${id}/conversation`)).body.messages.map(
    (m: { text?: string }) => m.text ?? '',
  );
const inspect = (name: string, format: string) =>
  execFileSync('docker', ['inspect', '--format', format, name], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  }).trim();
const PROBE = `"${process.execPath}" "${join(FIXTURES, 'probe-harness.mjs')}"`;

/** A CLI run inside a container: its provider's stub, and the model's turn that writes hello.txt. */
interface CliInside {
  type: 'codex' | 'claude';
  baseUrlVariable: string;
  start(): Promise<{
    url: string;
    script(...steps: any[]): void;
    modelRequests(): { headers: Record<string, unknown>; body: any }[];
    close(): Promise<void>;
  }>;
  writeFile: unknown;
  requests(
    stub: Awaited<ReturnType<CliInside['start']>>,
    marker: string,
  ): { headers: Record<string, unknown> }[];
  keyOf(req: { headers: Record<string, unknown> }): unknown;
}
const HELLO = 'hello from a container\n';
const CLIS_INSIDE: CliInside[] = [
  {
    type: 'codex',
    baseUrlVariable: 'OPENAI_BASE_URL',
    start: startOpenAIResponsesStub,
    writeFile: {
      calls: [
        {
          custom: 'apply_patch',
          input: `*** Begin Patch\n*** Add File: hello.txt\n+${HELLO}*** End Patch\n`,
        },
      ],
    },
    requests: (stub, marker) => stub.modelRequests().filter((r) => JSON.stringify(r.body).includes(marker)),
    keyOf: (r) => String(r.headers.authorization).replace(/^Bearer /, ''),
  },
  {
    type: 'claude',
    baseUrlVariable: 'ANTHROPIC_BASE_URL',
    start: startAnthropicStub,
    writeFile: (body: unknown) => ({
      tool: {
        name: 'Write',
        input: { file_path: join(workingDirectory(body), 'hello.txt'), content: HELLO },
      },
    }),
    requests: (stub, marker) =>
      stub.modelRequests().filter((r) => JSON.stringify(r.body.messages).includes(marker)),
    keyOf: (r) => r.headers['x-api-key'],
  },
];

describe.skipIf(unavailable)('the Docker backend (factoryd worker --backend docker)', () => {
  it('runs a run in its own container: its workspace, not the host, as an unprivileged uid, no Docker socket', async () => {
    const w = worker('dock-probe', await t.workerKey('dock-probe'), {
      HARNESS_COMMAND: PROBE,
      WORKER_DOCKER_MOUNTS: FIXTURES,
    });
    // The workspaces' folder (dataDir) is there, as the way to them; nothing else of it is.
    writeFileSync(join(dataDir, 'host-only'), 'not for harnesses');
    const hostOnly = [fromRoot('package.json'), fromRoot('src'), t.dataDir, join(dataDir, 'host-only')];
    const id = await create(`probe ${[...hostOnly, FIXTURES].join(' ')}`, 'dock-probe');
    const run = await ended(id);
    expect(run.state, w.output()).toBe('SUCCEEDED');
    const seen = JSON.parse((await messages(id)).find((m) => m.startsWith('{"uid"'))!);
    expect(seen).toMatchObject({
      uid: 65534,
      wroteWorkspace: 'from the container',
      imageMarker: true,
      dockerSocket: false,
    });
    expect(seen.cwd).toBe(seen.home);
    expect(seen.cwd).toContain(id);
    expect(seen.seen).toEqual({ ...Object.fromEntries(hostOnly.map((p) => [p, false])), [FIXTURES]: true });
    await eventually(() => containersNamed(id).length === 0, 'the succeeded run’s container removed');
  });

  it("runs an environment's setup commands in order, each in a container of the run's image, with the run's way out", async () => {
    const { factory } = await t.service.app.get(ManagedFactories).create({
      team: t.defaultTeam,
      name: 'docker-setup',
      branch: 'main',
      author: { name: 'Setup', email: 'setup@example.com' },
    });
    const env = await t.call('POST', '/api/v1/agent/environments', {
      name: 'in-image',
      factory_uid: factory.uid,
      docker_image: image,
      setup_commands: [
        'cat /etc/image-marker > marker.txt; id -u > setup-uid.txt',
        'cat marker.txt > second.txt',
        // Its way out is the run's: the forwarder listens at HTTPS_PROXY inside the setup's container.
        `perl -MIO::Socket::INET -e 'exit(IO::Socket::INET->new(shift) ? 0 : 1)' "\${HTTPS_PROXY#http://}" && echo reached > proxy.txt`,
      ],
    });
    expect(env.status).toBe(201);
    const w = worker('dock-setup', await t.workerKey('dock-setup'), {
      HARNESS_COMMAND:
        'echo "{\\"type\\":\\"result\\",\\"status\\":\\"succeeded\\",' +
        '\\"message\\":\\"saw $(cat second.txt) as $(cat setup-uid.txt), proxy $(cat proxy.txt)\\"}"',
    });
    const id = await create('set up', 'dock-setup', { environment_id: env.body.uid });
    const run = await ended(id);
    expect(run.state, w.output()).toBe('SUCCEEDED');
    expect(run.status_message?.message).toBe('saw inside the test image as 65534, proxy reached');
    const setups = (await t.call('GET', `/api/v1/agent/runs/${id}/conversation`)).body.messages.filter(
      (m: { kind: string }) => m.kind === 'environment_setup',
    );
    expect(setups.map((m: { input: { index: number; exit_code: number } }) => m.input)).toMatchObject([
      { index: 0, exit_code: 0 },
      { index: 1, exit_code: 0 },
      { index: 2, exit_code: 0 },
    ]);
    // Each setup's container (`<the run's>-setup-<n>`) is removed once it succeeded, and the run's too.
    await eventually(() => containersNamed(id).length === 0, 'the setup and run containers removed');
  });

  it('runs the example harness inside, follows a follow-up; cancel leaves no container behind', async () => {
    const w = worker('dock-example', await t.workerKey('dock-example'));
    const asked = await create('Hello from a container\n/ask Proceed?', 'dock-example');
    await runIn(t, asked, ['BLOCKED']);
    expect(containersNamed(asked)).toHaveLength(1);
    await t.call('POST', `/api/v1/agent/runs/${asked}/followups`, { message: 'yes' });
    expect((await ended(asked)).state, w.output()).toBe('SUCCEEDED');
    expect((await messages(asked)).join('\n')).toMatch(/yes/);

    const long = await create('Work a while\n/wait 120', 'dock-example');
    await runIn(t, long, ['INPROGRESS']);
    const name = await eventually(() => containersNamed(long)[0], 'the run’s container');
    await eventually(() => inspect(name, '{{.State.Running}}') === 'true', 'its container running');
    await t.call('POST', `/api/v1/agent/runs/${long}/cancel`);
    expect((await ended(long)).state).toBe('CANCELLED');
    await eventually(() => containersNamed(long).length === 0, 'the cancelled run’s container removed');
  });

  it('limits hold: a memory hog and a fork bomb end FAILED, the worker lives, a failed container is kept a while', async () => {
    const w = worker('dock-limits', await t.workerKey('dock-limits'), {
      HARNESS_COMMAND: PROBE,
      WORKER_DOCKER_MOUNTS: FIXTURES,
      WORKER_DOCKER_MEMORY: '96m',
      WORKER_DOCKER_PIDS: '64',
      // Half a core: the bomb spins, and on a 2-core machine at the default (2) it would starve the
      // worker itself, whose lease (3 s here) then lapses and the run ends ERROR, not FAILED.
      WORKER_DOCKER_CPUS: '0.5',
      WORKER_DOCKER_KEEP_FAILED_SECONDS: '4',
      // The bomb's idle minute: long enough to watch it spread on a loaded machine.
      IDLE_TIMEOUT_MINUTE_MS: '10000',
    });
    const hog = await create('membomb', 'dock-limits');
    const hogRun = await ended(hog);
    expect(hogRun.state, w.output()).toBe('FAILED');
    // Kept for a look, with what killed it, then removed.
    const kept = await eventually(
      () => containersNamed(hog).find((n: string) => n.endsWith('-failed')),
      'the kept container',
    );
    expect(
      inspect(kept, '{{.State.OOMKilled}} {{.State.ExitCode}}'),
      JSON.stringify(hogRun.status_message),
    ).toBe('true 137');
    await eventually(() => containersNamed(hog).length === 0, 'the kept container removed after its time', {
      timeoutMs: 30_000,
    });

    const bomb = await create('forkbomb', 'dock-limits', { idle_timeout_minutes: 1 });
    await eventually(async () => (await messages(bomb)).includes('bombing'), 'the bomb started');
    const [name] = containersNamed(bomb);
    // While it runs, the container never holds more than its processes' limit.
    const pids = await eventually(() => {
      const n = Number(
        execFileSync('docker', ['stats', '--no-stream', '--format', '{{.PIDs}}', name!], {
          encoding: 'utf8',
          stdio: ['ignore', 'pipe', 'pipe'],
        }),
      );
      return n >= 60 ? n : undefined;
    }, 'the bomb at its limit');
    expect(pids).toBeLessThanOrEqual(64);
    const bombRun = await ended(bomb);
    expect(bombRun.state).toBe('FAILED');
    expect(bombRun.status_message.message).toMatch(/idle/i);
    await eventually(() => containersNamed(bomb).length === 0, 'the stopped bomb’s container removed');

    expect(w.exitCode).toBeNull();
    const after = await create('probe /', 'dock-limits');
    expect((await ended(after)).state, w.output()).toBe('SUCCEEDED');
  });

  it('a killed worker leaves no container behind; one killed with its launcher is swept by the next', async () => {
    const key = await t.workerKey('dock-kill');
    const w = worker('dock-kill', key);
    const first = await create('Long\n/wait 120', 'dock-kill');
    await runIn(t, first, ['INPROGRESS']);
    await eventually(() => containersNamed(first).length === 1, 'its container');
    w.kill('SIGKILL');
    await eventually(() => containersNamed(first).length === 0, 'the container gone with its worker');

    const w2 = worker('dock-kill', key);
    const second = await create('Long\n/wait 120', 'dock-kill');
    await runIn(t, second, ['INPROGRESS']);
    await eventually(() => containersNamed(second).length === 1, 'its container');
    // The worker and its launchers at once (an OOM kill of the lot, a crash): nothing of theirs
    // removes the container, so the next worker on the machine does.
    for (const pid of [...childrenOf(w2.pid!), w2.pid!]) process.kill(pid, 'SIGKILL');
    const w3 = worker('dock-kill', key);
    await eventually(() => containersNamed(second).length === 0, 'the orphan removed by the next worker', {
      timeoutMs: 30_000,
    }).catch((err) => {
      throw new Error(`${(err as Error).message}\nworker: ${w3.output()}`);
    });
  });

  it('a service-hosted worker on the database runs its runs in containers too', async () => {
    const w = worker(undefined, '');
    const id = await create('Hello from a service-hosted container', undefined);
    await eventually(() => containersNamed(id).length === 1, 'the run’s container', { timeoutMs: 30_000 });
    expect((await ended(id)).state, w.output()).toBe('SUCCEEDED');
    await eventually(() => containersNamed(id).length === 0, 'its container removed');
  });

  it('a missing image that no registry serves fails the run at once, naming the image', async () => {
    const w = worker('dock-missing', await t.workerKey('dock-missing'), {
      WORKER_DOCKER_IMAGE: 'factoryd-test-absent:never-built',
    });
    const id = await create('Hello', 'dock-missing');
    const run = await ended(id);
    expect(run.state, w.output()).toBe('FAILED');
    expect(run.status_message.message).toMatch(
      /the image factoryd-test-absent:never-built is not on this machine and could not be pulled: \S/,
    );
    expect(containersNamed(id)).toEqual([]);
  });

  // Real agent CLIs inside: the worker's cached CLI bound in read-only, the provider reached only
  // through the run's egress socket (the container has no network), the key from a team secret.
  for (const c of CLIS_INSIDE) {
    const cli = testCli(c.type);
    it.skipIf(!cli.path)(
      `runs ${c.type} inside, reaching its provider only through the run's way out${cli.skip ? ` (skipped: ${cli.skip})` : ''}`,
      async () => {
        const stub = await c.start();
        try {
          const host = `dock-${c.type}`;
          const marker = `${host}-prompt`;
          const key = `test-${host}-${Math.random().toString(36).slice(2)}`;
          await t.service.app.get(SecretsService).set(t.defaultTeam.id, `${host}-key`, key);
          const w = worker(host, await t.workerKey(host), {
            HARNESSES_DIR: TEST_HARNESSES_DIR,
            [c.baseUrlVariable]: stub.url,
            WORKER_DOCKER_NETWORK: 'none',
          });
          // The model's first answer waits until the test has seen where the CLI runs.
          let release!: () => void;
          const held = new Promise<void>((r) => (release = r));
          stub.script({ after: held, then: c.writeFile }, { text: 'Wrote hello.txt in a container.' });
          const id = await create(`${marker}: add hello.txt`, host, {
            harness: { type: c.type, auth_secret_name: `${host}-key` },
          });
          await eventually(
            () => c.requests(stub, marker).length > 0,
            'the first model request, from inside the container',
            { timeoutMs: 20_000 },
          );
          const [name] = containersNamed(id);
          expect(name, w.output()).toBeDefined();
          expect(inspect(name!, '{{.HostConfig.NetworkMode}} {{.State.Running}}')).toBe('none true');
          release();
          const run = await runIn(t, id, ['SUCCEEDED', 'FAILED', 'ERROR', 'CANCELLED'], undefined, {
            timeoutMs: 90_000,
          });
          expect(run.state, `${JSON.stringify(run.status_message)}\n${w.output()}`).toBe('SUCCEEDED');
          expect(run.status_message.message).toBe('Wrote hello.txt in a container.');
          const file = run.artifacts.find((a: { artifact_type: string }) => a.artifact_type === 'FILE');
          expect(await artifactText(t, file)).toBe('hello from a container\n');
          // Both model calls came with the team's key, through the run's way out.
          const requests = c.requests(stub, marker);
          expect(requests.length).toBe(2);
          expect(requests.map(c.keyOf)).toEqual([key, key]);
        } finally {
          await stub.close();
        }
      },
    );
  }

  const claude = testCli('claude');
  it.skipIf(!claude.path)(
    `an image whose /tmp only root may write: the run fails, and its output says why${claude.skip ? ` (skipped: ${claude.skip})` : ''}`,
    async () => {
      const stub = await startAnthropicStub();
      try {
        await t.service.app.get(SecretsService).set(t.defaultTeam.id, 'root-tmp-key', 'test-root-tmp-key');
        const w = worker('dock-root-tmp', await t.workerKey('dock-root-tmp'), {
          HARNESSES_DIR: TEST_HARNESSES_DIR,
          ANTHROPIC_BASE_URL: stub.url,
          WORKER_DOCKER_IMAGE: imageWithRootOnlyTmp(image),
        });
        const id = await create('root-tmp: say hello', 'dock-root-tmp', {
          harness: { type: 'claude', auth_secret_name: 'root-tmp-key' },
        });
        const run = await runIn(t, id, ['SUCCEEDED', 'FAILED', 'ERROR', 'CANCELLED'], undefined, {
          timeoutMs: 90_000,
        });
        // Claude Code exits 0 there having said nothing: a turn that never finished, not a success.
        expect(run.state, w.output()).toBe('FAILED');
        expect(run.status_message.message).toMatch(/exited without finishing its turn/);
        // The transcript (its signed link followed): the harness's own output, the shell's word first.
        const transcript = await t.call('GET', `/api/v1/agent/runs/${id}/transcript`);
        expect(transcript.status).toBe(200);
        expect(String(transcript.body)).toContain(
          "factoryd: /tmp is not writable by the run's user in this image",
        );
        expect(stub.modelRequests()).toEqual([]);
      } finally {
        await stub.close();
      }
    },
  );

  it('refuses to start when the Engine cannot be reached, in one line naming the setting', () => {
    const out = (() => {
      try {
        execFileSync(process.execPath, [fromRoot('dist/cli/main.js'), 'worker', '--backend', 'docker'], {
          env: { ...process.env, DOCKER_HOST: 'unix:///nonexistent.sock', DATA_DIR: dataDir },
          encoding: 'utf8',
          stdio: ['ignore', 'pipe', 'pipe'],
          timeout: 30_000,
        });
        return '';
      } catch (err) {
        return String((err as { stderr: string }).stderr);
      }
    })();
    expect(out.trim().split('\n')).toHaveLength(1);
    expect(out).toMatch(/WORKER_BACKEND=docker: the Docker Engine does not answer/);
  });
});

/** The pids whose parent is `pid`. */
function childrenOf(pid: number): number[] {
  return readdirSync('/proc')
    .filter((e) => /^\d+$/.test(e))
    .filter((e) => {
      try {
        const stat = readFileSync(`/proc/${e}/stat`, 'utf8');
        return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid;
      } catch {
        return false;
      }
    })
    .map(Number);
}
