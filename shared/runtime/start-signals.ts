// A SIGTERM or SIGINT that reaches a service while it starts (a systemd stop, `deepq up` stopped
// right after it started): without a handler yet, Node's default kills the process, an exit "by
// a signal" that `deepq up` and a supervisor read as a crash. Caught from the command's first
// line: before its workers run, nothing was taken, so the process exits 0 at once; after, the
// signal is held until stopOnSignals drains the jobs like any stop. No BullMQ or config import
// here: the service commands load this before anything else.

let workersRun = false;
let held: string | undefined;

function onStartSignal(sig: NodeJS.Signals): void {
  if (!workersRun) process.exit(0);
  held ??= sig;
}

/** From the start of a service command until stopOnSignals takes over. */
export function catchStartSignals(): void {
  process.on('SIGTERM', onStartSignal);
  process.on('SIGINT', onStartSignal);
}

/** The workers are about to take jobs: a signal from now on waits for the drain. */
export function workersStarting(): void {
  workersRun = true;
}

/** Stops catching; returns a signal that came meanwhile (stopOnSignals acts on it). */
export function takeStartSignal(): string | undefined {
  process.off('SIGTERM', onStartSignal);
  process.off('SIGINT', onStartSignal);
  return held;
}
