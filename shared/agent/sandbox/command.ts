// The command line of one sandboxed run: prlimit's limits around the program, inside
// bubblewrap (mode bwrap) or not (mode none), and the spawn options (uid, environment).
import type { SandboxConfig } from './config.ts';
import { ipcSeccompFilter } from './seccomp.ts';

/** The uid/gid a root worker runs sandboxed code as (nobody/nogroup): never root. */
export const SANDBOX_UID = 65534;
/** Where the work dir appears inside bubblewrap: a tmpfs the size of the files limit (and a margin). */
export const SANDBOX_WORK = '/work';
/** Where the host dir holding the run's inputs appears inside bubblewrap, read-only: copied to /work first. */
export const SANDBOX_INPUTS = '/.inputs';
/**
 * Room in the work dir's tmpfs past the files limit: a run is killed as over the limit as soon as
 * it is seen past it (a write, a walk), and cannot write further than this past it in the meantime.
 */
export const WORK_MARGIN_BYTES = 1024 * 1024;
/** The PATH inside the sandbox: system directories only. */
export const SANDBOX_PATH = '/usr/local/bin:/usr/bin:/bin';
const MIB = 1024 * 1024;

/** Where bwrap reads the seccomp filter: the spawn's fourth stdio pipe. */
export const SECCOMP_FD = 3;
/** Where the keeper (below) writes `started`, then the program's exit status. */
export const STATUS_FD = 4;
/** Where bwrap writes its JSON info: `{"child-pid": N}`, the keeper's pid on the host. */
export const INFO_FD = 5;

/**
 * The sandbox's pid 1 (bwrap --as-pid-1): copies the inputs into the work dir, runs the program
 * (its arguments) and waits for it; then, or at SIGUSR1 from the worker (a limit was hit), kills
 * every other process of the sandbox, so nothing changes the work dir any more, writes the
 * program's status (a signal N as 128+N) and stays, holding the sandbox's mounts, until the worker
 * has read the work dir through /proc/<pid>/root and kills it. The program gets none of its fds.
 */
const KEEPER = [
  'trap stop=1 USR1',
  `cp -a ${SANDBOX_INPUTS}/. ${SANDBOX_WORK}/ ||`,
  `  { echo "deepq: the inputs were not copied into ${SANDBOX_WORK}" >&2; exit 125; }`,
  `echo started >&${STATUS_FD}`,
  'exec 9<&0',
  `"$@" <&9 9<&- ${STATUS_FD}>&- ${INFO_FD}>&- &`,
  'p=$!',
  // A SIGUSR1 before the wait (its trap runs between commands) must not leave it waiting.
  '[ -z "$stop" ] && wait "$p"; s=$?',
  'for i in 1 2 3 4 5 6 7 8; do kill -KILL -1 2>/dev/null || break; done',
  // Interrupted by SIGUSR1, the first wait returned early: this one reads the status.
  'wait "$p" 2>/dev/null; t=$?; [ "$t" -ne 127 ] && s=$t',
  `echo "exit $s" >&${STATUS_FD}`,
  'exec sleep infinity',
].join('\n');

export interface SandboxCommand {
  file: string;
  args: string[];
  /** Spawn options: the environment bwrap (or the program) starts with, and the uid to drop to. */
  env: Record<string, string>;
  uid?: number;
  gid?: number;
  /** The host directory the program starts in (mode none; bwrap changes dir itself). */
  cwd: string;
  /** A seccomp filter program bwrap reads from fd 3 (`--seccomp 3`): the caller writes it there. */
  seccomp?: Buffer;
  /** The program runs under the keeper (mode bwrap): read its fds STATUS_FD and INFO_FD. */
  keeper?: boolean;
}

/**
 * The environment the program sees: nothing of the worker's (no API keys, no REDIS_URL).
 * Node's heap is half the memory limit: its resident size (heap, code, buffers) then stays under
 * the run's limit, so running out reads as V8's own "heap out of memory", not a kill.
 */
export function sandboxEnv(limits: SandboxConfig, home: string): Record<string, string> {
  const heapMb = Math.max(16, Math.floor(limits.memoryMb * 0.5));
  return {
    PATH: SANDBOX_PATH,
    HOME: home,
    LANG: 'C.UTF-8',
    TMPDIR: '/tmp',
    PYTHONDONTWRITEBYTECODE: '1',
    PYTHONUNBUFFERED: '1',
    NODE_OPTIONS: `--max-old-space-size=${heapMb}`,
  };
}

/**
 * prlimit's arguments. CPU has a hard limit one second over the soft one: SIGXCPU at the soft
 * limit tells "CPU time" apart from the wall-time SIGKILL the worker sends.
 */
export function prlimitArgs(prlimit: string, limits: SandboxConfig): string[] {
  return [
    prlimit,
    `--cpu=${limits.cpuSeconds}:${limits.cpuSeconds + 1}`,
    `--nproc=${limits.maxProcesses}`,
    `--data=${limits.memoryMb * MIB}`,
    `--fsize=${limits.fileBytes}`,
    '--nofile=256',
    '--core=0',
    '--',
  ];
}

/**
 * bubblewrap's arguments: every namespace unshared (no network, own pids, own user), no
 * nested user namespaces, read-only /usr, size-bounded tmpfs for /tmp, /dev/shm and the work dir
 * at /work (its inputs bound read-only beside it), and everything else read-only.
 */
export function bwrapArgs(
  workDir: string,
  limits: SandboxConfig,
  env: Record<string, string>,
  disableUserns = true,
  seccompFd?: number,
): string[] {
  const setenv = Object.entries(env).flatMap(([k, v]) => ['--setenv', k, v]);
  const tmpBytes = String(limits.fileBytes);
  const workBytes = String(limits.fileBytes + WORK_MARGIN_BYTES);
  return [
    '--unshare-all',
    '--unshare-user',
    ...(disableUserns ? ['--disable-userns'] : []),
    ...(seccompFd === undefined ? [] : ['--seccomp', String(seccompFd)]),
    '--die-with-parent',
    '--new-session',
    '--as-pid-1',
    ...['--info-fd', String(INFO_FD)],
    '--clearenv',
    ...setenv,
    ...['--ro-bind', '/usr', '/usr'],
    ...['--symlink', 'usr/bin', '/bin', '--symlink', 'usr/lib', '/lib'],
    ...['--symlink', 'usr/lib64', '/lib64', '--symlink', 'usr/sbin', '/sbin'],
    ...['--ro-bind-try', '/etc/ld.so.cache', '/etc/ld.so.cache'],
    ...['--ro-bind-try', '/etc/alternatives', '/etc/alternatives'],
    ...['--proc', '/proc', '--dev', '/dev'],
    ...['--size', tmpBytes, '--tmpfs', '/dev/shm', '--size', tmpBytes, '--tmpfs', '/tmp'],
    ...['--ro-bind', workDir, SANDBOX_INPUTS, '--size', workBytes, '--tmpfs', SANDBOX_WORK, '--chdir', SANDBOX_WORK],
    // The root and /dev are tmpfs bwrap made (unbounded): nothing may be written there.
    ...['--remount-ro', '/dev', '--remount-ro', '/'],
    '--',
  ];
}

export interface CommandInput {
  mode: SandboxConfig['mode'];
  bwrap: string | null;
  prlimit: string;
  workDir: string;
  limits: SandboxConfig;
  argv: string[];
  /** The worker's uid (process.getuid()): root drops to SANDBOX_UID, anyone else keeps theirs. */
  uid: number;
  /** Pass --disable-userns (bwrap 0.8+): no user namespaces nested inside the sandbox. */
  disableUserns?: boolean;
}

export function sandboxCommand(c: CommandInput): SandboxCommand {
  const drop = c.uid === 0 ? { uid: SANDBOX_UID, gid: SANDBOX_UID } : {};
  const limited = [...prlimitArgs(c.prlimit, c.limits), ...c.argv];
  if (c.mode === 'none') {
    const env = sandboxEnv(c.limits, c.workDir);
    return { file: c.prlimit, args: limited.slice(1), env, cwd: c.workDir, ...drop };
  }
  if (!c.bwrap) throw new Error('bwrap is not installed');
  const inner = sandboxEnv(c.limits, SANDBOX_WORK);
  // bwrap's own environment must be empty: its pid 1 keeps it, readable at /proc/1/environ.
  const seccomp = ipcSeccompFilter() ?? undefined;
  const fd = seccomp ? SECCOMP_FD : undefined;
  const keeper = ['/bin/sh', '-c', KEEPER, 'deepq-keeper'];
  const args = [...bwrapArgs(c.workDir, c.limits, inner, c.disableUserns ?? true, fd), ...keeper, ...limited];
  return { file: c.bwrap, args, env: {}, cwd: '/', keeper: true, ...drop, ...(seccomp ? { seccomp } : {}) };
}
