// One sandboxed run: spawn the command detached (its own process group), feed stdin, keep
// output tails, and kill the whole tree at once (SIGKILL to the group; bwrap's
// --die-with-parent and its pid namespace take the rest) on the wall limit, too much output,
// a full work dir, or the job's abort (goal cancelled, time budget out).
import { type ChildProcess, spawn } from 'node:child_process';
import type { Writable } from 'node:stream';
import type { Logger } from 'pino';
import { findSandboxBinaries, type SandboxBinaries } from './binaries.ts';
import { SECCOMP_FD, sandboxCommand } from './command.ts';
import type { SandboxConfig } from './config.ts';
import { type Exit, type KillReason, type LimitHit, limitOf, outcomeOf, type SandboxOutcome } from './outcome.ts';
import { Tail } from './output.ts';
import { measureTree } from './process-tree.ts';
import { type Walk, walkWorkDir } from './workdir.ts';
import { WorkDirWatch } from './workdir-watch.ts';

/** Bytes of stdout and of stderr kept for the result. */
export const TAIL_BYTES = 12 * 1024;
/** How often the work dir's size and the run's resident memory are measured. */
const WORKDIR_POLL_MS = 250;
/**
 * The least time between the starts of two walks a program's writes ask for (it makes folders),
 * plus this much per name the last one walked: a walk of 2,000 names takes about 100 ms of CPU,
 * and walks back to back would keep a core busy for the whole run.
 */
const WRITE_MEASURE_GAP_MS = 20;
const WRITE_MEASURE_GAP_PER_NAME_MS = 0.2;

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
  /** How often the work dir and the process tree are measured besides writes at the top (250 ms). */
  pollMs?: number;
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
  const seconds = (performance.now() - started) / 1000;
  if ('error' in ended) return failed(ended.error);
  const exit: Exit = { ...ended, stderrTail: stderr.text(), seconds };
  if (exit.killed === 'cancel') return { ...failed('the job was aborted'), code: exit.code, aborted: true };
  const limit = limitOf(exit, req.limits);
  return { outcome: outcomeOf(exit, limit), limit, code: exit.code, signal: exit.signal, stdout, stderr, seconds };
}

type Ended = Pick<Exit, 'code' | 'signal' | 'killed' | 'peakTasks'> | { error: string };

/** Runs the command to its end, killing its process group at the first reason to. */
function supervise(
  req: SandboxRequest,
  cmd: ReturnType<typeof sandboxCommand>,
  stdout: Tail,
  stderr: Tail,
): Promise<Ended> {
  return new Promise((resolve) => {
    const child = spawn(cmd.file, cmd.args, {
      cwd: cmd.cwd,
      env: cmd.env,
      uid: cmd.uid,
      gid: cmd.gid,
      detached: true,
      stdio: ['pipe', 'pipe', 'pipe', ...(cmd.seccomp ? (['pipe'] as const) : [])],
    });
    // bwrap reads its seccomp filter to the end of this pipe before it starts the program; one
    // that fails first (no namespaces) closes it unread: its own error says why, not this one.
    if (cmd.seccomp) {
      const filter = child.stdio[SECCOMP_FD] as Writable;
      filter.on('error', () => {});
      filter.end(cmd.seccomp);
    }
    let killed: KillReason | null = null;
    const kill = (why: KillReason) => {
      killed ??= why;
      killGroup(child.pid);
    };
    const peak = { tasks: 0 };
    const stopWatching = watch(req, kill, child.pid, peak);
    const onData = (tail: Tail) => (chunk: Buffer) => {
      tail.push(chunk);
      if (stdout.total + stderr.total > req.limits.outputBytes) kill('output');
    };
    child.stdout.on('data', onData(stdout));
    child.stderr.on('data', onData(stderr));
    // A program that exits without reading its input closes the pipe: not an error of ours.
    child.stdin.on('error', () => {});
    child.stdin.end(req.stdin ?? '');
    child.once('error', (err) => {
      stopWatching();
      resolve({ error: `could not start ${cmd.file}: ${err.message}` });
    });
    child.once('exit', (code, signal) => {
      stopWatching();
      void afterExit(child).then(() => resolve({ code, signal, killed, peakTasks: peak.tasks }));
    });
  });
}

/** SIGKILL to the group: bwrap (mode bwrap), or prlimit's program and its children (mode none). */
function killGroup(pid: number | undefined): void {
  if (!pid) return;
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    /* the group is gone */
  }
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
    try {
      process.kill(-pgid, 0);
    } catch {
      return;
    }
    if (Date.now() > until) return;
    await new Promise((r) => setTimeout(r, 25));
  }
}

/**
 * Starts the wall timer, the abort listener and the poll of the work dir's size and the whole
 * tree's resident memory and tasks (the most seen go to `peak`); returns their stop. Between two
 * polls the work dir's writes are followed as they happen (workdir-watch.ts): 60 writers put
 * 210-316 MiB past a 16 MiB limit within one 250 ms poll before it (measured).
 */
function watch(
  req: SandboxRequest,
  kill: (why: KillReason) => void,
  pid: number | undefined,
  peak: { tasks: number },
): () => void {
  const wall = setTimeout(() => kill('wall'), req.limits.wallSeconds * 1000);
  const onAbort = () => kill('cancel');
  req.signal?.addEventListener('abort', onAbort, { once: true });
  let writes: WorkDirWatch | undefined;
  const measure = measurer(req, kill, pid, peak, (w) => writes?.walked(w));
  writes = new WorkDirWatch(req.workDir, req.limits.fileBytes, { over: () => kill('files'), walkNeeded: measure.now });
  const poll = setInterval(measure.now, req.pollMs ?? WORKDIR_POLL_MS);
  measure.now(); // the folders the inputs came in are watched from the start
  return () => {
    clearTimeout(wall);
    clearInterval(poll);
    writes?.close();
    measure.stop();
    req.signal?.removeEventListener('abort', onAbort);
  };
}

/**
 * One measurement at a time; a call during one runs once more, WRITE_MEASURE_GAP_MS (more for a
 * work dir of many names) after it started: a program making folders asks on every one.
 * `walked` gets each measurement's walk.
 */
function measurer(
  req: SandboxRequest,
  kill: (why: KillReason) => void,
  pid: number | undefined,
  peak: { tasks: number },
  walked: (w: Walk) => void,
): { now: () => void; stop: () => void } {
  const maxResident = req.limits.memoryMb * 1024 * 1024;
  let state: 'idle' | 'busy' | 'again' | 'stopped' = 'idle';
  let later: NodeJS.Timeout | undefined;
  let names = 0;
  const measure = () => {
    if (state === 'stopped') return;
    if (state !== 'idle' || later) {
      if (state === 'busy') state = 'again';
      return;
    }
    state = 'busy';
    const started = performance.now();
    Promise.all([walkWorkDir(req.workDir), pid ? measureTree(pid, req.limits.mode !== 'bwrap') : null])
      .then(([w, tree]) => {
        // Files deleted while held open take disk too; memory files take memory VmRSS misses.
        if (w.bytes + (tree?.deletedBytes ?? 0) > req.limits.fileBytes || w.truncated) kill('files');
        names = w.entries.length + w.dirs.length;
        walked(w);
        if (!tree) return;
        if (tree.residentBytes + tree.memfdBytes > maxResident) kill('memory');
        peak.tasks = Math.max(peak.tasks, tree.tasks);
      })
      .catch(() => {})
      .finally(() => {
        if (state === 'stopped') return;
        const again = state === 'again';
        state = 'idle';
        if (!again) return;
        const gap = WRITE_MEASURE_GAP_MS + WRITE_MEASURE_GAP_PER_NAME_MS * names;
        const wait = Math.max(0, gap - (performance.now() - started));
        later = setTimeout(() => {
          later = undefined;
          measure();
        }, wait);
      });
  };
  const stop = () => {
    state = 'stopped';
    clearTimeout(later);
  };
  return { now: measure, stop };
}
