/** All of stdin as text, for commands that take a prompt, a message or a secret from a pipe. */
export async function readStdin(what: string): Promise<string> {
  if (process.stdin.isTTY) throw new Error(`pipe ${what} on stdin`);
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** A secret from stdin: one trailing newline (what `echo` adds) is not part of it. */
export async function readSecretFromStdin(what: string): Promise<string> {
  return (await readStdin(what)).replace(/\r?\n$/, '');
}
