// What a whole sandboxed run uses, from /proc: the resident memory and the tasks (processes
// and threads) of its process and every descendant. RLIMIT_DATA bounds each process alone, so
// a run that forks N workers could use N times the limit: the supervisor kills the tree past
// `memoryMb` in all. RLIMIT_NPROC refuses forks silently to a program that hides its stderr:
// the task count shows the limit was reached.
import { readdir, readFile } from 'node:fs/promises';

export interface TreeUsage {
  residentBytes: number;
  /** Tasks (RLIMIT_NPROC counts tasks) of the tree below its root, or with it (`countRoot`). */
  tasks: number;
}

/** Children of each process, from /proc/<pid>/stat's parent pid. */
async function childrenByParent(): Promise<Map<number, number[]>> {
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

/** Every descendant of `rootPid` (children, theirs, ...), not the root itself; [] where /proc cannot say. */
export async function descendantsOf(rootPid: number): Promise<number[]> {
  const children = await childrenByParent().catch(() => new Map<number, number[]>());
  const out: number[] = [];
  for (const queue = [...(children.get(rootPid) ?? [])]; queue.length; ) {
    const pid = queue.pop()!;
    out.push(pid);
    queue.push(...(children.get(pid) ?? []));
  }
  return out;
}

/** One process's VmRSS in bytes and its tasks (0 and 0 once it is gone, or for a zombie's memory). */
async function usageOf(pid: number): Promise<TreeUsage> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  const kb = /^VmRSS:\s+(\d+) kB$/m.exec(status)?.[1];
  const tasks = Number(/^Threads:\s+(\d+)$/m.exec(status)?.[1] ?? 0);
  return { residentBytes: kb ? Number(kb) * 1024 : 0, tasks };
}

/**
 * What `rootPid` and all its descendants use now (pages shared between them count for each).
 * Under bubblewrap the root is bwrap outside the sandbox's user namespace, whose RLIMIT_NPROC
 * does not count it (its init inside does): `countRoot` false leaves the root's tasks out.
 */
export async function measureTree(rootPid: number, countRoot = true): Promise<TreeUsage> {
  const children = await childrenByParent();
  const tree: number[] = [];
  for (const queue = [rootPid]; queue.length; ) {
    const pid = queue.pop()!;
    tree.push(pid);
    queue.push(...(children.get(pid) ?? []));
  }
  const all = await Promise.all(tree.map(usageOf));
  if (!countRoot && all[0]) all[0] = { ...all[0], tasks: 0 };
  return all.reduce((a, b) => ({ residentBytes: a.residentBytes + b.residentBytes, tasks: a.tasks + b.tasks }));
}
