// One sandboxed run: spawn the command detached (its own process group), feed stdin, keep
// output tails, and stop the program on the wall limit, too much output, a full work dir, or the
// job's abort (goal cancelled, time budget out). Under bubblewrap the keeper (keeper.ts) stops it
// and holds the sandbox while `afterRun` reads the work dir, a tmpfs inside; then the whole tree
// is killed at once (SIGKILL to the group; bwrap's --die-with-parent and its pid namespace take
// the rest), as on an abort.
import { type ChildProcess, spawn } from 'node:child_process';
import type { Writable } from 'node:stream';
import type { Logger } from 'pino';
import { findSandboxBinaries, type SandboxBinaries } from './binaries.ts';
import { type SandboxCommand, SECCOMP_FD, sandboxCommand } from './command.ts';
import type { SandboxConfig } from './config.ts';
import { Keeper } from './keeper.ts';
import { type Exit, type KillReason, type LimitHit, limitOf, outcomeOf, type SandboxOutcome } from './outcome.ts';
import { Tail } from './output.ts';
import { measureTree, signalQuietly } from './process-tree.ts';
import { tmpfsUsage } from './tmpfs-usage.ts';
import { WALK_MAX_ENTRIES, type Walk, walkWorkDir } from './workdir.ts';
import { WorkDirWatch } from './workdir-watch.ts';

/** Bytes of stdout and of stderr kept for the result. */
export const TAIL_BYTES = 12 * 1024;
/** How often the work dir's size and the run's resident memory are measured. */
const WORKDIR_POLL_MS = 250;
/** The least time between the starts of two measurements a program's writes ask for (it makes folders). */
const WRITE_MEASURE_GAP_MS = 20;
/** A poll walks the work dir once this many times the last walk's length has passed since it began. */
const WALK_SPACING = 5;
/** About what a walk of the work dir costs in CPU per name (measured: 2,000 names, 100 ms). */
const WALK_CPU_MS_PER_NAME = 0.05;

export interface SandboxRequest {
  /** The program and its arguments (looked up on the sandbox's PATH). */
  argv: string[];
  /** A host dir made by createWorkDir: /work inside bwrap, the cwd under mode none. */
  workDir: string;
  limits: SandboxConfig;
  stdin?: string;
  signal?: AbortSignal;
  log?: Logger;
  /** Where bwrap and prlimit are (default: the worker's PATH). */
  binaries?: SandboxBinaries;
  /** How often the process tree (and, spaced by its cost, the work dir) is measured: 250 ms. */
  pollMs?: number;
  /**
   * Reads what the program left, at `dir` (under bubblewrap the work dir inside the sandbox, which
   * goes with it), before the sandbox is removed; `dir` is null where the sandbox ended before its
   * keeper's report (bwrap failed to start, the keeper was killed). Not called for a run that
   * could not start or was aborted. Nothing else runs meanwhile: every process of the run is gone
   * or stopped.
   */
  afterRun?: (dir: string | null, result: SandboxResult) => Promise<void>;
}

export interface SandboxResult {
  outcome: SandboxOutcome;
  limit: LimitHit | null;
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: Tail;
  stderr: Tail;
  seconds: number;
  /** Set when the run could not start or was killed by the job's abort (outcome `error`). */
  error?: string;
  /** The job's abort stopped it (before or during the run). */
  aborted?: boolean;
}

export async function runSandboxed(req: SandboxRequest): Promise<SandboxResult> {
  const started = performance.now();
  const stdout = new Tail(TAIL_BYTES);
  const stderr = new Tail(TAIL_BYTES);
  const bins = req.binaries ?? findSandboxBinaries();
  const failed = (error: string): SandboxResult => {
    const seconds = (performance.now() - started) / 1000;
    return { outcome: 'error', limit: null, code: null, signal: null, stdout, stderr, seconds, error };
  };
  if (req.limits.mode === 'none') {
    req.log?.warn({ sandbox: 'none' }, 'run_code runs WITHOUT isolation (sandbox.mode: none)');
  }
  if (!bins.prlimit) return failed('prlimit is not installed (util-linux)');
  if (req.limits.mode === 'bwrap' && !bins.bwrap) return failed('bwrap is not installed (Debian package bubblewrap)');
  if (req.signal?.aborted) return { ...failed('not run: the job was aborted'), aborted: true };
  const cmd = sandboxCommand({
    mode: req.limits.mode,
    bwrap: bins.bwrap,
    prlimit: bins.prlimit,
    workDir: req.workDir,
    limits: req.limits,
    argv: req.argv,
    uid: process.getuid?.() ?? -1,
    disableUserns: bins.disableUserns,
  });
  const ended = await supervise(req, cmd, stdout, stderr);
  try {
    const seconds = (performance.now() - started) / 1000;
    if ('error' in ended) return failed(ended.error);
    const exit: Exit = { ...ended, stderrTail: stderr.text(), seconds };
    if (exit.killed === 'cancel') return { ...failed('the job was aborted'), code: exit.code, aborted: true };
    const limit = limitOf(exit, req.limits);
    const result: SandboxResult = {
      ...{ outcome: outcomeOf(exit, limit), limit, code: exit.code, signal: exit.signal },
      ...{ stdout, stderr, seconds },
    };
    await afterRun(req, ended, result);
    return result;
  } finally {
    await ended.release?.();
  }
}

/** The caller's read of the work dir: where the keeper holds it (bwrap) or on the host (none). */
async function afterRun(req: SandboxRequest, ended: Ran, result: SandboxResult): Promise<void> {
  if (!req.afterRun) return;
  const dir = ended.keeper ? await ended.keeper.workDir() : req.limits.mode === 'none' ? req.workDir : null;
  await req.afterRun(dir, result);
}

/**
 * Past the files limit when the program ended: a program that filled its work dir or a temp dir
 * between two polls and exited 0 (its writes failing with ENOSPC unchecked) still hit the limit.
 */
async function filesOverAtEnd(at: MeasuredAt, fileBytes: number): Promise<boolean> {
  try {
    if ('sandboxRoot' in at) {
      const u = await tmpfsUsage(at.sandboxRoot);
      return u.workBytes > fileBytes || u.tempFull || u.mostEntries > WALK_MAX_ENTRIES;
    }
    const walk = await walkWorkDir(at.hostDir);
    return walk.bytes > fileBytes || walk.truncated;
  } catch {
    return false;
  }
}

type Ran = Pick<Exit, 'code' | 'signal' | 'killed' | 'peakTasks' | 'filesOver'> & {
  /** Holds the sandbox (its work dir readable) until `release`, which kills it. */
  keeper?: Keeper;
  release?: () => Promise<void>;
};
type Ended = Ran | { error: string; release?: undefined };

/**
 * Runs the command to its end. Under bubblewrap its end is the keeper's `exit` line (the sandbox
 * held until release), or bwrap's own exit where there was none (it failed to start, or the
 * keeper was killed).
 */
function supervise(req: SandboxRequest, cmd: SandboxCommand, stdout: Tail, stderr: Tail): Promise<Ended> {
  return new Promise((resolve) => {
    const child = spawnCommand(cmd);
    let killed: KillReason | null = null;
    const peak = { tasks: 0 };
    let grace: NodeJS.Timeout | undefined;
    const kill = (why: KillReason) => {
      killed ??= why;
      if (why !== 'cancel' && keeper?.stop()) grace ??= setTimeout(() => killGroup(child.pid), STOP_GRACE_MS);
      else killGroup(child.pid);
    };
    const watching = watch(req, kill, child.pid, peak);
    const keeper = cmd.keeper
      ? new Keeper(child, {
          started: () => watching.measure({ sandboxRoot: `/proc/${keeper?.pid}/root` }),
          exited: async (code) => {
            clearTimeout(grace);
            watching.stop();
            const release = () => afterExit(child);
            // Still held: what it left, measured once more (its last writes came after the last poll).
            const filesOver = await filesOverAtEnd({ sandboxRoot: `/proc/${keeper?.pid}/root` }, req.limits.fileBytes);
            const ran = { code, signal: null, killed, peakTasks: peak.tasks, filesOver, keeper, release };
            // The program's last output is in its pipes by now: one more turn of the loop reads it.
            setTimeout(() => resolve(ran), 0);
          },
        })
      : undefined;
    if (!keeper) watching.measure({ hostDir: req.workDir });
    const onData = (tail: Tail) => (chunk: Buffer) => {
      tail.push(chunk);
      if (stdout.total + stderr.total > req.limits.outputBytes) kill('output');
    };
    child.stdout?.on('data', onData(stdout));
    child.stderr?.on('data', onData(stderr));
    // A program that exits without reading its input closes the pipe: not an error of ours.
    child.stdin?.on('error', () => {});
    child.stdin?.end(req.stdin ?? '');
    child.once('error', (err) => {
      watching.stop();
      resolve({ error: `could not start ${cmd.file}: ${err.message}` });
    });
    child.once('exit', (code, signal) => {
      clearTimeout(grace);
      watching.stop();
      keeper?.gone();
      // Ended by the keeper's line: the sandbox's release (afterExit) is the caller's.
      if (keeper?.exitedFirst) return;
      void afterExit(child)
        .then(() => (keeper ? false : filesOverAtEnd({ hostDir: req.workDir }, req.limits.fileBytes)))
        .then((filesOver) => resolve({ code, signal, killed, peakTasks: peak.tasks, filesOver }));
    });
  });
}

/** How long the keeper has to stop the program and report, before the whole sandbox is killed. */
const STOP_GRACE_MS = 3000;

/** Spawns detached (a group of its own), with the seccomp filter written to its pipe. */
function spawnCommand(cmd: SandboxCommand): ChildProcess {
  const keeperFds = cmd.keeper ? (['pipe', 'pipe'] as const) : [];
  const child = spawn(cmd.file, cmd.args, {
    cwd: cmd.cwd,
    env: cmd.env,
    uid: cmd.uid,
    gid: cmd.gid,
    detached: true,
    stdio: ['pipe', 'pipe', 'pipe', cmd.seccomp ? 'pipe' : 'ignore', ...keeperFds],
  });
  // bwrap reads its seccomp filter to the end of this pipe before it starts the program; one
  // that fails first (no namespaces) closes it unread: its own error says why, not this one.
  if (cmd.seccomp) {
    const filter = child.stdio[SECCOMP_FD] as Writable;
    filter.on('error', () => {});
    filter.end(cmd.seccomp);
  }
  return child;
}

/** SIGKILL to the group: bwrap (mode bwrap), or prlimit's program and its children (mode none). */
function killGroup(pid: number | undefined): void {
  if (pid) signalQuietly(-pid, 'SIGKILL');
}

/**
 * After the exit: whatever the program left running in its group goes too (bwrap's pid
 * namespace already took its own), the pipes drain (or are cut after a second, if something
 * kept them open), and the group is reaped.
 */
function afterExit(child: ChildProcess): Promise<void> {
  killGroup(child.pid);
  return new Promise<void>((resolve) => {
    const cut = setTimeout(() => {
      child.stdout?.destroy();
      child.stderr?.destroy();
      resolve();
    }, 1000);
    child.once('close', () => {
      clearTimeout(cut);
      resolve();
    });
  }).then(() => groupGone(child.pid));
}

/** How long a run's end waits for its killed process group to be reaped. */
const GROUP_GONE_MS = 3000;

/**
 * Resolves once no process of the group is left, zombies included (they count against the
 * next run's process limit under mode none until the host's init reaps them), or after GROUP_GONE_MS.
 */
async function groupGone(pgid: number | undefined): Promise<void> {
  if (!pgid) return;
  const until = Date.now() + GROUP_GONE_MS;
  for (;;) {
    if (!signalQuietly(-pgid, 0)) return;
    if (Date.now() > until) return;
    await new Promise((r) => setTimeout(r, 25));
  }
}

/**
 * Where a run's files are measured: inside bubblewrap's mounts (the sandbox's root seen from the
 * host, `/proc/<keeper pid>/root`), or the work dir on the host (mode none).
 */
type MeasuredAt = { sandboxRoot: string } | { hostDir: string };

/**
 * Starts the wall timer and the abort listener; `measure(at)` starts the poll of the files' size
 * (once they are there: under bubblewrap when the keeper says so) and the whole tree's resident
 * memory and tasks (the most seen go to `peak`); `stop` ends them all. On the host, between two
 * polls the work dir's writes are followed as they happen (workdir-watch.ts): 60 writers put
 * 210-316 MiB past a 16 MiB limit within one 250 ms poll before it (measured). Under bubblewrap
 * the work dir's tmpfs size is that bound, and nothing is walked while the program runs.
 */
function watch(
  req: SandboxRequest,
  kill: (why: KillReason) => void,
  pid: number | undefined,
  peak: { tasks: number },
): { measure(at: MeasuredAt): void; stop(): void } {
  const wall = setTimeout(() => kill('wall'), req.limits.wallSeconds * 1000);
  const onAbort = () => kill('cancel');
  req.signal?.addEventListener('abort', onAbort, { once: true });
  let writes: WorkDirWatch | undefined;
  let measure: Measurer | undefined;
  let poll: NodeJS.Timeout | undefined;
  let stopped = false;
  return {
    measure(at) {
      if (stopped || measure) return;
      measure = new Measurer(req, at, kill, pid, peak, (w) => writes?.walked(w));
      if ('hostDir' in at) {
        const events = { over: () => kill('files'), walkNeeded: measure.walk };
        writes = new WorkDirWatch(at.hostDir, req.limits.fileBytes, events);
      }
      poll = setInterval(measure.poll, req.pollMs ?? WORKDIR_POLL_MS);
      measure.walk(); // the folders the inputs came in are watched from the start
    },
    stop() {
      stopped = true;
      clearTimeout(wall);
      clearInterval(poll);
      writes?.close();
      measure?.stop();
      req.signal?.removeEventListener('abort', onAbort);
    },
  };
}

/**
 * The run's measurements: the process tree at every poll; under bubblewrap the mounts' usage
 * (statfs) at every poll too. On the host, the work dir's walk at a poll only once WALK_SPACING
 * times its last walk's length has passed (a walk of 5,000 names takes about a quarter second of
 * CPU: walked at every poll it took a core), and whenever a folder is made (`walk`; at most every
 * WRITE_MEASURE_GAP_MS, or what the last walk's names cost, after the last start). One at a
 * time; a call during one runs once more after it. `walked` gets each walk.
 */
class Measurer {
  private state: 'idle' | 'busy' | 'stopped' = 'idle';
  private again: { walk: boolean } | null = null;
  private later: NodeJS.Timeout | undefined;
  private last = { at: Number.NEGATIVE_INFINITY, ms: 0, bytes: 0, names: 0 };

  constructor(
    private readonly req: SandboxRequest,
    private readonly at: MeasuredAt,
    private readonly kill: (why: KillReason) => void,
    private readonly pid: number | undefined,
    private readonly peak: { tasks: number },
    private readonly walked: (w: Walk) => void,
  ) {}

  readonly poll = () => this.measure(false);
  readonly walk = () => this.measure(true);

  stop(): void {
    this.state = 'stopped';
    clearTimeout(this.later);
  }

  private measure(walk: boolean): void {
    if (this.state === 'stopped') return;
    if (this.state === 'busy' || this.later) {
      this.again = { walk: walk || (this.again?.walk ?? false) };
      return;
    }
    this.state = 'busy';
    const started = performance.now();
    const walking = walk || started - this.last.at >= WALK_SPACING * this.last.ms;
    const { req, pid } = this;
    Promise.all([this.files(walking), pid ? measureTree(pid, req.limits.mode !== 'bwrap') : null])
      .then(([files, tree]) => {
        if (files) {
          this.last = { at: started, ms: performance.now() - started, bytes: files.bytes, names: files.names };
          if (files.over) this.kill('files');
          if (files.walk) this.walked(files.walk);
        }
        this.judge(tree);
      })
      .catch(() => {})
      .finally(() => this.next(started));
  }

  /** The files' bytes and names now, and whether past the entries cap: statfs, or a walk when due. */
  private async files(walking: boolean): Promise<{ bytes: number; names: number; over: boolean; walk?: Walk } | null> {
    if ('sandboxRoot' in this.at) {
      const u = await tmpfsUsage(this.at.sandboxRoot);
      return { bytes: u.workBytes, names: 0, over: u.mostEntries > WALK_MAX_ENTRIES };
    }
    if (!walking) return null;
    const walk = await walkWorkDir(this.at.hostDir);
    return { bytes: walk.bytes, names: walk.entries.length + walk.dirs.length, over: walk.truncated, walk };
  }

  private judge(tree: Awaited<ReturnType<typeof measureTree>> | null): void {
    // Files deleted while held open take disk too (a tmpfs's usage counts them already); memory
    // files take memory VmRSS misses.
    const deleted = 'sandboxRoot' in this.at ? 0 : (tree?.deletedBytes ?? 0);
    if (this.last.bytes + deleted > this.req.limits.fileBytes) this.kill('files');
    if (!tree) return;
    if (tree.residentBytes + tree.memfdBytes > this.req.limits.memoryMb * 1024 * 1024) this.kill('memory');
    this.peak.tasks = Math.max(this.peak.tasks, tree.tasks);
  }

  private next(started: number): void {
    if (this.state === 'stopped') return;
    this.state = 'idle';
    const again = this.again;
    this.again = null;
    if (!again) return;
    // Folders made one after another in a work dir of many names: walks back to back would keep a
    // core busy too (a walk takes about 50 µs of CPU per name). Its time would also count waits
    // for a disk the program keeps busy, which would space them out just when it writes fastest.
    const gap = Math.max(WRITE_MEASURE_GAP_MS, again.walk ? WALK_CPU_MS_PER_NAME * this.last.names : 0);
    const wait = Math.max(0, gap - (performance.now() - started));
    this.later = setTimeout(() => {
      this.later = undefined;
      this.measure(again.walk);
    }, wait);
  }
}
