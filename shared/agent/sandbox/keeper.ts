// The host side of the sandbox's keeper (its pid 1, command.ts): its host pid from bwrap's info,
// its `started` and `exit N` lines, the signal that stops the program, and where the work dir can
// be read while it holds the sandbox's mounts: /proc/<pid>/root/work.
import type { ChildProcess } from 'node:child_process';
import { readFile, readlink } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { INFO_FD, SANDBOX_WORK, STATUS_FD } from './command.ts';
import { isAlive, listPids, procStat, signalQuietly } from './process-tree.ts';

/** Bytes of a status or info line kept while its end has not come: the keeper's are short. */
const LINE_MAX = 4096;
/** Checks that the sandbox is still, after an `exit` line (see confirm): half a second or more in all. */
const CONFIRM_TRIES = 100;
const CONFIRM_GAP_MS = 5;
const RECONFIRM_MS = 250;

export interface KeeperEvents {
  /** The inputs are in the work dir and the program starts: the work dir can be measured. */
  started(): void;
  /** The program ended (a signal N as 128+N) and nothing runs in the sandbox: the work dir is still. */
  exited(code: number): void;
}

/**
 * The keeper as the worker sees it. Its status lines could come from the program too (the same
 * uid: pidfd_getfd on pid 1's fds works), and so could the keeper's own acts (ptrace). So an
 * `exit` line is taken only once the keeper, stopped from here (SIGSTOP), is the `sleep` it execs
 * after its last line, and no other process of the sandbox is alive: then nothing can change the
 * work dir, whoever wrote what, and the last line read is the keeper's.
 */
export class Keeper {
  pid: number | null = null;
  private state: 'starting' | 'running' | 'exited' | 'gone' = 'starting';
  private status = '';
  private info = '';
  private sawStarted = false;
  private lastExit: number | null = null;
  private confirming = false;

  constructor(
    private readonly child: ChildProcess,
    private readonly events: KeeperEvents,
  ) {
    this.read(INFO_FD, (text) => {
      this.info = (this.info + text).slice(0, LINE_MAX);
      this.pid ??= Number(/"child-pid":\s*(\d+)/.exec(this.info)?.[1]) || null;
      this.progress();
    });
    this.read(STATUS_FD, (text) => {
      this.status = (this.status + text).slice(-LINE_MAX);
      for (let nl = this.status.indexOf('\n'); nl >= 0; nl = this.status.indexOf('\n')) {
        const line = this.status.slice(0, nl);
        this.status = this.status.slice(nl + 1);
        this.onLine(line);
      }
      this.progress();
    });
  }

  /** The program's end came from the keeper (bwrap still runs, holding the sandbox). */
  get exitedFirst(): boolean {
    return this.state === 'exited';
  }

  /** bwrap exited: nothing more to wait for. */
  gone(): void {
    if (this.state !== 'exited') this.state = 'gone';
  }

  /** Asks the keeper to stop the program (SIGUSR1); false where it cannot be asked (not started). */
  stop(): boolean {
    if (this.state !== 'running' || this.pid === null) return false;
    signalQuietly(this.pid, 'SIGUSR1');
    return true;
  }

  /** Where the work dir can be read: the keeper's root, while its parent is still this run's bwrap. */
  async workDir(): Promise<string | null> {
    if (this.pid === null || this.state !== 'exited') return null;
    const status = await readFile(`/proc/${this.pid}/status`, 'utf8').catch(() => '');
    const ppid = Number(/^PPid:\s+(\d+)$/m.exec(status)?.[1]);
    return ppid === this.child.pid ? `/proc/${this.pid}/root${SANDBOX_WORK}` : null;
  }

  private read(fd: number, onText: (text: string) => void): Readable | null {
    const stream = this.child.stdio[fd] as Readable | null;
    stream?.setEncoding('utf8');
    stream?.on('data', onText);
    stream?.on('error', () => {});
    return stream;
  }

  private onLine(line: string): void {
    if (line === 'started') this.sawStarted = true;
    const exit = /^exit (\d{1,3})$/.exec(line);
    if (exit && this.sawStarted) this.lastExit = Number(exit[1]);
  }

  /** Acts on what has come: bwrap's info and the keeper's lines arrive on two pipes, in either order. */
  private progress(): void {
    if (this.state === 'starting' && this.sawStarted && this.pid !== null) {
      this.state = 'running';
      this.events.started();
    }
    if (this.state === 'running' && this.lastExit !== null && !this.confirming) void this.confirm();
  }

  /**
   * Stops the keeper and checks the sandbox is still; where it is not yet (the keeper between its
   * line and its exec, the killed processes not gone yet, or the line not the keeper's), lets the
   * keeper go on (SIGCONT) and tries again, for half a second or more, then again a moment later, until
   * it is or the run ends otherwise (bwrap's exit, a limit).
   */
  private async confirm(): Promise<void> {
    const pid = this.pid;
    if (pid === null) return;
    this.confirming = true;
    try {
      for (let i = 0; i < CONFIRM_TRIES && this.state === 'running'; i++) {
        signalQuietly(pid, 'SIGSTOP');
        if (await still(pid)) {
          this.state = 'exited';
          this.events.exited(this.lastExit!);
          return;
        }
        signalQuietly(pid, 'SIGCONT');
        await sleep(CONFIRM_GAP_MS);
      }
    } finally {
      this.confirming = false;
    }
    // Still not still (slow deaths, or the line was the program's): again later, until the run ends.
    if (this.state === 'running') setTimeout(() => this.progress(), RECONFIRM_MS).unref();
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The keeper stopped, running `sleep` (its script's end), with no live process under it. */
async function still(pid: number): Promise<boolean> {
  // A SIGSTOP takes effect on the keeper's next return to user space: a moment.
  const stopped = async () => (await procStat(pid))?.state === 'T';
  for (let i = 0; i < 10 && !(await stopped()); i++) await sleep(2);
  if (!(await stopped())) return false;
  const exe = await readlink(`/proc/${pid}/exe`).catch(() => '');
  return exe.split('/').pop() === 'sleep' && !(await hasLiveChild(pid));
}

/**
 * Whether a live process (isAlive: a zombie leader with running threads is one) has `pid` as its
 * parent. Every live process of the sandbox has a live parent or the keeper (pid 1 there: orphans
 * go to it), so none with the keeper as parent means none at all.
 */
export async function hasLiveChild(pid: number): Promise<boolean> {
  // Without CONFIG_PROC_CHILDREN, every process is looked at.
  const children = await readFile(`/proc/${pid}/task/${pid}/children`, 'utf8').catch(() => null);
  const pids = children === null ? await listPids() : children.split(' ').filter(Boolean).map(Number);
  const live = await Promise.all(pids.map(async (p) => (await procStat(p))?.ppid === pid && (await isAlive(p))));
  return live.some(Boolean);
}
