// `deepq up`: every service as its own child process, each with its own metrics port.
// Ctrl-C / SIGTERM stops them all cleanly; a child that dies is restarted. Each child has an
// IPC channel to the supervisor: when the supervisor dies, even by SIGKILL, the channel closes
// and the child drains and exits by itself (stopOnSignals in shared/runtime/service.ts).
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

// The CLI entry, from the sources (cli/) or from the build (dist/cli/): it checks the build afresh
// for each child, so a child restarted after an edit never runs stale output.
const entry = import.meta.url.endsWith('.js') ? '../../bin/deepq.mjs' : '../bin/deepq.mjs';
export const BIN = fileURLToPath(new URL(entry, import.meta.url));

export interface ChildSpec {
  name: string;
  args: string[];
  port: number;
}

export function planChildren(roles: string[], portBase: number, replicas = 1): ChildSpec[] {
  const specs: ChildSpec[] = [
    { name: 'planner', args: ['planner'], port: 0 },
    { name: 'reflector', args: ['reflector'], port: 0 },
  ];
  for (const role of roles) {
    for (let r = 0; r < replicas; r++)
      specs.push({
        name: replicas > 1 ? `worker-${role}-${r + 1}` : `worker-${role}`,
        args: ['worker', '--role', role],
        port: 0,
      });
  }
  return specs.map((s, i) => ({ ...s, port: portBase === 0 ? 0 : portBase + i }));
}

export interface Supervisor {
  children: Map<string, ChildProcess>;
  /** Stops every child (closing its channel, then SIGKILL after the timeout); resolves to their exit codes. */
  stop(timeoutMs?: number): Promise<Map<string, number | null>>;
}

/** A child up this long counts as started: its failures in a row start counting again. */
const STARTED_AFTER_MS = 30_000;
/** Failures in a row, each before STARTED_AFTER_MS, after which a child is not restarted. */
const MAX_QUICK_FAILURES = 5;
/** A service's exit code for a configuration it refuses (EX_CONFIG): restarting cannot help. */
export const CONFIG_ERROR_EXIT = 78;

export interface SuperviseOptions {
  env?: NodeJS.ProcessEnv;
  stdio?: 'inherit' | 'ignore' | 'pipe';
  onExit?: (name: string, code: number | null) => void;
  /** A child that will not start (a configuration error, or failing again and again): not restarted. */
  onGiveUp?: (name: string, reason: string, code: number | null) => void;
}

export function supervise(specs: ChildSpec[], opts: SuperviseOptions = {}): Supervisor {
  const children = new Map<string, ChildProcess>();
  let stopping = false;
  const launch = (spec: ChildSpec, quickFailures = 0) => {
    if (stopping) return; // a restart timer that fired after stop() began
    const io = opts.stdio ?? 'inherit';
    const startedAt = Date.now();
    const child = spawn(process.execPath, [BIN, ...spec.args], {
      env: { ...process.env, ...opts.env, METRICS_PORT: String(spec.port) },
      // The channel carries no messages: its closing tells the child the supervisor is gone.
      stdio: [io, io, io, 'ipc'],
      // Its own process group: a terminal's Ctrl-C reaches only the supervisor, which then
      // drains each child once (a child seeing two signals would quit hard).
      detached: true,
    });
    children.set(spec.name, child);
    child.on('exit', (code, signal) => {
      opts.onExit?.(spec.name, code);
      if (stopping) return;
      const failures = Date.now() - startedAt < STARTED_AFTER_MS ? quickFailures + 1 : 0;
      const hopeless =
        code === CONFIG_ERROR_EXIT
          ? 'it refused its configuration'
          : failures >= MAX_QUICK_FAILURES
            ? `it exited ${failures} times in a row within ${STARTED_AFTER_MS / 1000} s of starting`
            : null;
      if (hopeless) return opts.onGiveUp?.(spec.name, hopeless, code);
      process.stderr.write(`deepq up: ${spec.name} exited (${signal ?? code}); restarting\n`);
      // Not unref'd: with every child down between restarts, it is what keeps the supervisor
      // alive (unref'd, it ended with exit 0, no child running and nothing said).
      setTimeout(() => launch(spec, failures), Math.min(5000, 250 * 2 ** failures));
    });
  };
  for (const s of specs) launch(s);
  // If the supervisor exits with children still running, it stops them (a supervisor killed
  // outright runs no code: then the closed IPC channel stops them).
  process.once('exit', () => {
    for (const c of children.values()) if (c.exitCode === null && c.signalCode === null) c.kill('SIGTERM');
  });
  return {
    children,
    async stop(timeoutMs = 30_000) {
      stopping = true;
      const codes = new Map<string, number | null>();
      await Promise.all(
        [...children.entries()].map(async ([name, c]) => codes.set(name, await stopChild(c, timeoutMs))),
      );
      return codes;
    },
  };
}

/** Asks one child to drain and exit (SIGKILL past `timeoutMs`); resolves to its exit code, 0 when stopped as asked. */
function stopChild(c: ChildProcess, timeoutMs: number): Promise<number | null> {
  if (c.exitCode !== null || c.signalCode !== null) return Promise.resolve(c.exitCode);
  return new Promise((resolve) => {
    const t = setTimeout(() => c.kill('SIGKILL'), timeoutMs);
    c.once('exit', (code, signal) => {
      clearTimeout(t);
      // Still starting (no signal handler yet), SIGTERM ended it: stopped as asked. So did
      // the terminal's Ctrl-C, for a child forked but not yet in its own process group.
      resolve(code ?? (signal === 'SIGTERM' || signal === 'SIGINT' ? 0 : null));
    });
    // Closing the channel asks for one drain. A SIGTERM would be a second signal to a
    // child that got its own (systemd stops a unit's every process at once), which
    // then quits at once, its running jobs cut short.
    if (c.connected) c.disconnect();
    else c.kill('SIGTERM');
  });
}
