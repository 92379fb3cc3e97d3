import { createInterface } from 'node:readline';
import { Writable } from 'node:stream';

/** All of stdin as text, for commands that take a prompt, a message or a secret from a pipe. */
export async function readStdin(what: string): Promise<string> {
  if (process.stdin.isTTY) throw new Error(`pipe ${what} on stdin`);
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * A secret: asked for at a terminal (typed or pasted, not echoed), else all of stdin; one trailing
 * newline (what `echo` adds) is not part of it.
 */
export async function readSecret(what: string): Promise<string> {
  if (process.stdin.isTTY) return askUnechoed(`${what} (typed or pasted; not shown), then Enter: `);
  return (await readStdin(what)).replace(/\r?\n$/, '');
}

/** One line read at a terminal with nothing echoed: readline writes its echo to a stream that drops it. */
async function askUnechoed(question: string): Promise<string> {
  const dropped = new Writable({ write: (_chunk, _encoding, done) => done() });
  // The terminal leaves echoing to readline (raw mode) before the question shows: what is typed
  // as soon as it appears is never echoed by the terminal itself.
  const rl = createInterface({ input: process.stdin, output: dropped, terminal: true });
  process.stderr.write(question);
  try {
    const value = await new Promise<string>((resolve, reject) => {
      rl.once('line', resolve);
      rl.once('SIGINT', () => reject(new Error('cancelled: nothing was set')));
      rl.once('close', () => reject(new Error('no value given: nothing was set')));
    });
    if (value === '') throw new Error('an empty value: nothing was set');
    return value;
  } finally {
    process.stderr.write('\n');
    rl.close();
  }
}
