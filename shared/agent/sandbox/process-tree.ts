// What a whole sandboxed run uses, from /proc: the resident memory and the tasks (processes
// and threads) of its process and every descendant. RLIMIT_DATA bounds each process alone, so
// a run that forks N workers could use N times the limit: the supervisor kills the tree past
// `memoryMb` in all. RLIMIT_NPROC refuses forks silently to a program that hides its stderr:
// the task count shows the limit was reached.
import { readdir, readFile, readlink, stat } from 'node:fs/promises';
import { diskBytes } from './workdir.ts';

export interface TreeUsage {
  residentBytes: number;
  /** Tasks (RLIMIT_NPROC counts tasks) of the tree below its root, or with it (`countRoot`). */
  tasks: number;
  /** Bytes of memory files (memfd_create) the tree holds open: memory VmRSS does not show. */
  memfdBytes: number;
  /** Bytes of deleted files the tree holds open: disk no walk of a directory finds. */
  deletedBytes: number;
}

/** The pids /proc lists now ([] where it cannot be read). */
export async function listPids(): Promise<number[]> {
  const names = await readdir('/proc').catch(() => [] as string[]);
  return names.filter((d) => /^\d+$/.test(d)).map(Number);
}

/** A process's state letter (R, S, T stopped, Z, ...) and parent pid, from /proc; null once it is gone. */
export function procStat(pid: number): Promise<{ state: string; ppid: number } | null> {
  return statAt(`/proc/${pid}/stat`);
}

/** A process's or one of its threads' (`/proc/<pid>/task/<tid>/stat`) state and parent pid. */
async function statAt(path: string): Promise<{ state: string; ppid: number } | null> {
  const stat = await readFile(path, 'utf8').catch(() => '');
  if (!stat) return null;
  // comm may hold spaces and parentheses: the fields start after the last ')'.
  const [state = '', ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { state, ppid: Number(ppid) };
}

/**
 * Whether a process runs: not a zombie, or a zombie whose leader exited alone (`syscall(SYS_exit)`)
 * while its other threads run on. Its stat says Z all the same: a sandboxed program made itself
 * look gone that way, and the worker read its work dir while it still swapped folders for links.
 */
export async function isAlive(pid: number): Promise<boolean> {
  const stat = await procStat(pid);
  if (!stat || stat.state === 'X') return false;
  if (stat.state !== 'Z') return true;
  const tasks = await readdir(`/proc/${pid}/task`).catch(() => [] as string[]);
  const stats = await Promise.all(tasks.map((t) => statAt(`/proc/${pid}/task/${t}/stat`)));
  return stats.some((s) => s !== null && s.state !== 'Z' && s.state !== 'X');
}

/** A signal to a process (or, with a negative pid, its group), where it may be gone already. */
export function signalQuietly(pid: number, sig: NodeJS.Signals | 0): boolean {
  try {
    process.kill(pid, sig);
    return true;
  } catch {
    return false;
  }
}

/** Children of each process, from /proc/<pid>/stat's parent pid. */
async function childrenByParent(): Promise<Map<number, number[]>> {
  const children = new Map<number, number[]>();
  const pids = await listPids();
  await Promise.all(
    pids.map(async (pid) => {
      const ppid = (await procStat(pid))?.ppid;
      if (!ppid) return;
      const list = children.get(ppid) ?? [];
      list.push(pid);
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
async function usageOf(pid: number): Promise<Pick<TreeUsage, 'residentBytes' | 'tasks'>> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  const kb = /^VmRSS:\s+(\d+) kB$/m.exec(status)?.[1];
  const tasks = Number(/^Threads:\s+(\d+)$/m.exec(status)?.[1] ?? 0);
  return { residentBytes: kb ? Number(kb) * 1024 : 0, tasks };
}

/**
 * The files the processes hold open that no other measure sees: memory files and deleted files,
 * by size, each file once (by device and inode) however many descriptors share it.
 */
async function heldFiles(pids: number[]): Promise<Pick<TreeUsage, 'memfdBytes' | 'deletedBytes'>> {
  const seen = new Map<string, { memfd: boolean; size: number }>();
  await Promise.all(
    pids.map(async (pid) => {
      const fds = await readdir(`/proc/${pid}/fd`).catch(() => [] as string[]);
      for (const fd of fds) {
        const path = `/proc/${pid}/fd/${fd}`;
        const target = await readlink(path).catch(() => '');
        const memfd = target.startsWith('/memfd:');
        if (!memfd && !target.endsWith(' (deleted)')) continue;
        const st = await stat(path).catch(() => null);
        if (st?.isFile()) seen.set(`${st.dev}:${st.ino}`, { memfd, size: diskBytes(st) });
      }
    }),
  );
  let memfdBytes = 0;
  let deletedBytes = 0;
  for (const f of seen.values()) {
    if (f.memfd) memfdBytes += f.size;
    else deletedBytes += f.size;
  }
  return { memfdBytes, deletedBytes };
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
  const [all, held] = await Promise.all([Promise.all(tree.map(usageOf)), heldFiles(tree)]);
  if (!countRoot && all[0]) all[0] = { ...all[0], tasks: 0 };
  const sum = all.reduce((a, b) => ({ residentBytes: a.residentBytes + b.residentBytes, tasks: a.tasks + b.tasks }));
  return { ...sum, ...held };
}
