/**
 * Programs of this package that run as a harness: started as a harness's uid (as root, bwrap's user
 * or `user` mode's leased uids), which must reach Node and the program's folder by path. From a
 * checkout those uids cannot pass through (under /root, in a `mktemp -d`), they run from a copy made
 * once per content (shared-runtime.ts); otherwise from where they lie.
 */
import { join } from 'node:path';
import { fromRoot } from '../../common/paths.js';
import { reachableCopy } from '../../common/shared-runtime.js';

/** The shell command line that runs `file` of the package's folder `folder` with this Node. */
export function packageProgramCommand(folder: string, file: string): string {
  const node = reachableCopy(process.execPath, 'node');
  const dir = reachableCopy(fromRoot(folder), folder.replaceAll('/', '-'));
  return `${quoted(node)} ${quoted(join(dir, file))}`;
}

/** HARNESS_COMMAND's default: the shipped example harness. */
export const exampleHarnessCommand = () => packageProgramCommand('examples/harness', 'agent.js');

/** Shell-quoted, for a command line. */
const quoted = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;
