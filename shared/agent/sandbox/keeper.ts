// The host side of the sandbox's keeper (its pid 1, command.ts): its host pid from bwrap's info,
// its `started` and `exit N` lines, the signal that stops the program, and where the work dir can
// be read while it holds the sandbox's mounts: /proc/<pid>/root/work.
import type { ChildProcess } from 'node:child_process';
import { readdir, readFile } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { INFO_FD, SANDBOX_WORK, STATUS_FD } from './command.ts';

/** Bytes of a status or info line kept while its end has not come: the keeper's are short. */
const LINE_MAX = 4096;
/** Checks that nothing but the keeper runs any more, before its `exit` line is taken (see confirm). */
const CONFIRM_TRIES = 20;
const CONFIRM_GAP_MS = 50;

export interface KeeperEvents {
  /** The inputs are in the work dir and the program starts: the work dir can be measured. */
  started(): void;
  /** The program ended (a signal N as 128+N) and nothing else runs: the work dir is still. */
  exited(code: number): void;
}

/**
 * The keeper as the worker sees it. Its status lines could also come from the program (it can
 * open /proc/1/fd/N as the same uid), so an `exit` line is taken only once no process of the
 * sandbox but the keeper is alive: then nothing can change the work dir, whoever wrote the line.
 */
export class Keeper {
  pid: number | null = null;
  private state: 'starting' | 'running' | 'exited' = 'starting';
  private status = '';
  private info = '';

  constructor(
    private readonly child: ChildProcess,
    private readonly events: KeeperEvents,
  ) {
    this.read(INFO_FD, (text) => {
      this.info = (this.info + text).slice(0, LINE_MAX);
      this.pid ??= Number(/"child-pid":\s*(\d+)/.exec(this.info)?.[1]) || null;
    });
    this.read(STATUS_FD, (text) => {
      this.status = (this.status + text).slice(-LINE_MAX);
      for (let nl = this.status.indexOf('\n'); nl >= 0; nl = this.status.indexOf('\n')) {
        const line = this.status.slice(0, nl);
        this.status = this.status.slice(nl + 1);
        this.onLine(line);
      }
    });
  }

  /** The program's end came as the keeper's line (bwrap still runs, holding the sandbox). */
  get exitedFirst(): boolean {
    return this.state === 'exited';
  }

  /** Asks the keeper to stop the program (SIGUSR1); false where it cannot be asked (not started). */
  stop(): boolean {
    if (this.state !== 'running' || this.pid === null) return false;
    try {
      process.kill(this.pid, 'SIGUSR1');
      return true;
    } catch {
      return false;
    }
  }

  /** Where the work dir can be read: the keeper's root, while its parent is still this run's bwrap. */
  async workDir(): Promise<string | null> {
    if (this.pid === null || this.state !== 'exited') return null;
    const status = await readFile(`/proc/${this.pid}/status`, 'utf8').catch(() => '');
    const ppid = Number(/^PPid:\s+(\d+)$/m.exec(status)?.[1]);
    return ppid === this.child.pid ? `/proc/${this.pid}/root${SANDBOX_WORK}` : null;
  }

  private read(fd: number, onText: (text: string) => void): void {
    const stream = this.child.stdio[fd] as Readable | null;
    stream?.setEncoding('utf8');
    stream?.on('data', onText);
    stream?.on('error', () => {});
  }

  private onLine(line: string): void {
    if (line === 'started' && this.state === 'starting' && this.pid !== null) {
      this.state = 'running';
      this.events.started();
    }
    const exit = /^exit (\d{1,3})$/.exec(line);
    if (exit && this.state === 'running') void this.confirm(Number(exit[1]));
  }

  /** Takes an `exit` line once the keeper has no live child left (tried for about a second). */
  private async confirm(code: number): Promise<void> {
    for (let i = 0; i < CONFIRM_TRIES && this.state === 'running'; i++) {
      if (this.pid !== null && !(await hasLiveChild(this.pid))) {
        this.state = 'exited';
        this.events.exited(code);
        return;
      }
      await new Promise((r) => setTimeout(r, CONFIRM_GAP_MS));
    }
  }
}

/**
 * Whether a process other than a zombie has `pid` as its parent. Every live process of the
 * sandbox has a live parent or the keeper (pid 1 there: orphans go to it), so none with the
 * keeper as parent means none at all.
 */
async function hasLiveChild(pid: number): Promise<boolean> {
  const children = await readFile(`/proc/${pid}/task/${pid}/children`, 'utf8').catch(() => null);
  const pids = children === null ? await allPids() : children.split(' ').filter(Boolean);
  const states = await Promise.all(pids.map((p) => readFile(`/proc/${p}/stat`, 'utf8').catch(() => '')));
  return states.some((stat) => {
    const [state, ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(ppid) === pid && state !== 'Z' && state !== 'X';
  });
}

async function allPids(): Promise<string[]> {
  return (await readdir('/proc')).filter((d) => /^\d+$/.test(d));
}
