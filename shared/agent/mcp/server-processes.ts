// A stdio MCP server's processes, stopped with its connection. The SDK ends its own child only:
// a server started through a wrapper (`npx`, `sh -c`) is that child's child, and a process the
// server left running on its own (a fork that called setsid, its parent gone) is no descendant
// at all: init took it. Each connection attempt marks its server's environment
// (DEEPQ_MCP_SERVER=<id>), which forks and execs keep, so those are found by the mark too.
// (A process started with an emptied environment, `env -i`, escapes it.)
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { descendantsOf, listPids, signalQuietly } from '../sandbox/process-tree.ts';

export const SERVER_MARK_ENV = 'DEEPQ_MCP_SERVER';

/** One attempt's server: the SDK's child, and the mark its environment carries. */
export interface ServerProcesses {
  pid: number | null;
  mark: string;
}

export const newServerMark = (): string => `${process.pid}-${randomBytes(8).toString('hex')}`;

/** Pids whose environment holds the mark: the worker's own processes (any, for a root worker). */
async function markedWith(mark: string): Promise<number[]> {
  const needle = `\0${SERVER_MARK_ENV}=${mark}\0`;
  const found = await Promise.all(
    (await listPids()).map(async (p) => {
      const env = await readFile(`/proc/${p}/environ`, 'latin1').catch(() => '');
      return `\0${env}`.includes(needle) ? p : 0;
    }),
  );
  return found.filter((p) => p !== 0 && p !== process.pid);
}

/**
 * Closes the client, then stops every process of its server found before the close (its
 * descendants and the ones its mark finds): SIGTERM, then SIGKILL a second later, each only while
 * it still runs what it ran (a pid can be reused once it is gone). The SDK's close is given a
 * second: on a server that ignores EOF and SIGTERM it takes 4 s, and a worker's stop (5 s for
 * the whole close) exited before the SIGKILL, leaving the server running.
 */
export async function closeServer(close: () => Promise<void>, server: ServerProcesses | null): Promise<void> {
  const pids = server
    ? new Set([...(server.pid ? await descendantsOf(server.pid) : []), ...(await markedWith(server.mark))])
    : new Set<number>();
  const tree = await Promise.all([...pids].map(async (p) => [p, await cmdline(p)] as const));
  await Promise.race([close().catch(() => {}), new Promise((r) => setTimeout(r, 1000).unref())]);
  if (!tree.length) return;
  const signal = async (sig: NodeJS.Signals) => {
    for (const [p, cmd] of tree) if (cmd && (await cmdline(p)) === cmd) signalQuietly(p, sig);
  };
  await signal('SIGTERM');
  await new Promise((r) => setTimeout(r, 1000).unref());
  await signal('SIGKILL');
}

function cmdline(pid: number): Promise<string> {
  return readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
}
