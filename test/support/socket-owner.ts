import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

/**
 * Which of `pids` holds the client end of a loopback TCP connection to `serverPort` from `clientPort`
 * (Linux: the socket's inode in /proc/net/tcp, then the process whose descriptors name it); undefined
 * when none does (the process has exited, say). A receiver on loopback calls it when it accepts a
 * connection, when the client's descriptor is sure to exist: so it tells which process sent what,
 * with no marker of the sender's own.
 */
export function socketOwner(
  clientPort: number,
  serverPort: number,
  pids: ReadonlyArray<number | undefined>,
): number | undefined {
  const inode = clientInode(clientPort, serverPort);
  if (!inode) return undefined;
  const link = `socket:[${inode}]`;
  for (const pid of pids) {
    if (!pid) continue;
    let fds: string[];
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue; // gone
    }
    for (const fd of fds) {
      try {
        if (readlinkSync(`/proc/${pid}/fd/${fd}`) === link) return pid;
      } catch {
        // closed meanwhile
      }
    }
  }
  return undefined;
}

/** The inode of the socket whose local port is `clientPort` and remote port `serverPort` (IPv4). */
function clientInode(clientPort: number, serverPort: number): string | undefined {
  const local = `:${clientPort.toString(16).toUpperCase().padStart(4, '0')}`;
  const remote = `:${serverPort.toString(16).toUpperCase().padStart(4, '0')}`;
  for (const line of readFileSync('/proc/net/tcp', 'utf8').split('\n').slice(1)) {
    // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode …
    const f = line.trim().split(/\s+/);
    if (f[1]?.endsWith(local) && f[2]?.endsWith(remote) && f[9] !== '0') return f[9];
  }
  return undefined;
}
