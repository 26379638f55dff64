// What a finished run amounts to: one outcome (the metric's label, one of the six the metric
// documents) and, when a limit stopped it, which one, in words for the first line of the tool
// result. Causes without a label of their own (a cancel, the process limit) count as `error`.
import type { SandboxConfig } from './config.ts';
import { WALK_MAX_ENTRIES } from './workdir.ts';

export const SANDBOX_OUTCOMES = ['ok', 'nonzero_exit', 'timeout', 'memory', 'output_limit', 'error'] as const;
export type SandboxOutcome = (typeof SANDBOX_OUTCOMES)[number];

export type LimitKind = 'wall' | 'cpu' | 'memory' | 'output' | 'files' | 'file_size' | 'processes';
export interface LimitHit {
  kind: LimitKind;
  /** E.g. "wall time (30 s)". */
  text: string;
  /** Found when the program had ended (its files measured then), not what stopped it. */
  atEnd?: boolean;
}

/** Why the worker itself killed the run, if it did. */
export type KillReason = 'wall' | 'output' | 'files' | 'memory' | 'cancel';

export interface Exit {
  /** The exit code; bubblewrap reports a program killed by signal N as 128+N. */
  code: number | null;
  signal: NodeJS.Signals | null;
  killed: KillReason | null;
  /** The most tasks (processes and threads) the run was seen with, polled every 250 ms. */
  peakTasks?: number;
  /** Its files were past the files limit (or a temp dir full) when it ended. */
  filesOver?: boolean;
  stderrTail: string;
  seconds: number;
}

const SIGNALS: Record<number, NodeJS.Signals> = { 6: 'SIGABRT', 9: 'SIGKILL', 24: 'SIGXCPU', 25: 'SIGXFSZ' };
const MEMORY_RE =
  /MemoryError|out of memory|ENOMEM|bad_alloc|Cannot allocate memory|Array buffer allocation failed|Allocation failed/i;
const FORK_RE = /Cannot fork|fork: retry|fork failed|spawn EAGAIN|BlockingIOError: \[Errno 11\]|can't fork/i;
const FILE_SIZE_RE = /File too large|EFBIG/;
const XFSZ_REPORTED_RE = /File size limit exceeded/;
// The work dir (and /tmp) are tmpfs mounts of a fixed size: a write past it fails with ENOSPC.
const NO_SPACE_RE = /No space left on device|ENOSPC/;

const mib = (bytes: number) => `${Math.round((bytes / (1024 * 1024)) * 10) / 10} MiB`;
export const limitText = {
  wall: (l: SandboxConfig) => `wall time (${l.wallSeconds} s)`,
  cpu: (l: SandboxConfig) => `CPU time (${l.cpuSeconds} s)`,
  memory: (l: SandboxConfig) => `memory (${l.memoryMb} MiB)`,
  output: (l: SandboxConfig) => `output (${mib(l.outputBytes)})`,
  files: (l: SandboxConfig) =>
    `files written (${mib(l.fileBytes)}, or ${WALK_MAX_ENTRIES} entries in the work dir or a temp dir)`,
  file_size: (l: SandboxConfig) => `file size (${mib(l.fileBytes)})`,
  processes: (l: SandboxConfig) => `processes (${l.maxProcesses})`,
} satisfies Record<LimitKind, (l: SandboxConfig) => string>;

/** The signal that ended the program: spawn's, or bubblewrap's 128+N. */
export function exitSignal(e: Pick<Exit, 'code' | 'signal'>): NodeJS.Signals | null {
  if (e.signal) return e.signal;
  if (e.code !== null && e.code > 128) return SIGNALS[e.code - 128] ?? null;
  return null;
}

const hit = (kind: LimitKind, l: SandboxConfig): LimitHit => ({ kind, text: limitText[kind](l) });

/** The limit a run hit, judged by who killed it, its signal, then its last stderr lines. */
export function limitOf(e: Exit, l: SandboxConfig): LimitHit | null {
  if (e.killed && e.killed !== 'cancel') return hit(e.killed, l);
  const sig = exitSignal(e);
  if (sig === 'SIGXCPU') return hit('cpu', l);
  if (sig === 'SIGXFSZ') return hit('file_size', l);
  // The hard CPU limit (one second past the soft one) is a SIGKILL too: tell it by the time run.
  if (sig === 'SIGKILL' && e.seconds >= l.cpuSeconds) return hit('cpu', l);
  // A shell whose forks were refused may still exit 0 (a fork bomb's parent returns at once);
  // other messages count only when the program failed (a test may print "MemoryError" and pass).
  // Seen at the limit: forks were refused, whatever the program printed (or hid).
  if (FORK_RE.test(e.stderrTail) || (e.peakTasks ?? 0) >= l.maxProcesses) return hit('processes', l);
  // A shell reports a child the file-size limit killed, and may go on to exit 0.
  if (XFSZ_REPORTED_RE.test(e.stderrTail)) return hit('file_size', l);
  // Measured, not read: the files it left were past the limit, whatever it exited with.
  if (e.filesOver) return { ...hit('files', l), atEnd: true };
  if (e.code === 0) return null;
  if (MEMORY_RE.test(e.stderrTail)) return hit('memory', l);
  if (FILE_SIZE_RE.test(e.stderrTail)) return hit('file_size', l);
  if (NO_SPACE_RE.test(e.stderrTail)) return hit('files', l);
  return null;
}

/**
 * The metric's outcome for a run that ended (spawn errors are counted as `error` by the caller).
 * A run killed by the job's abort, or stopped by the process limit, did not get to do its work:
 * `error` (the result's first line, or the thrown message, names the real cause).
 */
export function outcomeOf(e: Exit, limit: LimitHit | null): SandboxOutcome {
  if (e.killed === 'cancel') return 'error';
  switch (limit?.kind) {
    case 'wall':
    case 'cpu':
      return 'timeout';
    case 'memory':
      return 'memory';
    case 'output':
    case 'files':
    case 'file_size':
      return 'output_limit';
    case 'processes':
      return 'error';
    default:
      return e.code === 0 ? 'ok' : 'nonzero_exit';
  }
}
