// The resident memory of a whole sandboxed run: its process and every descendant, from /proc.
// RLIMIT_DATA bounds each process alone, so a run that forks N workers could use N times the
// limit; the run's supervisor measures the tree and kills it past `memoryMb` in all.
import { readdir, readFile } from 'node:fs/promises';

/** Parent pid of each process, from /proc/<pid>/stat (the field after the `(comm)` and state). */
async function parents(): Promise<Map<number, number[]>> {
  const children = new Map<number, number[]>();
  const pids = (await readdir('/proc')).filter((d) => /^\d+$/.test(d));
  await Promise.all(
    pids.map(async (pid) => {
      const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
      // comm may hold spaces and parentheses: the fields start after the last ')'.
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (!ppid) return;
      const list = children.get(ppid) ?? [];
      list.push(Number(pid));
      children.set(ppid, list);
    }),
  );
  return children;
}

/** VmRSS of one process in bytes (0 once it is gone, or for a zombie). */
async function residentBytes(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  const kb = /^VmRSS:\s+(\d+) kB$/m.exec(status)?.[1];
  return kb ? Number(kb) * 1024 : 0;
}

/** Resident bytes of `rootPid` and all its descendants (pages shared between them count for each). */
export async function treeResidentBytes(rootPid: number): Promise<number> {
  const children = await parents();
  const tree: number[] = [];
  for (const queue = [rootPid]; queue.length; ) {
    const pid = queue.pop()!;
    tree.push(pid);
    queue.push(...(children.get(pid) ?? []));
  }
  const sizes = await Promise.all(tree.map(residentBytes));
  return sizes.reduce((a, b) => a + b, 0);
}
