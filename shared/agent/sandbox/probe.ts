// Fail closed: before a worker whose role runs code takes any job, one tiny run goes through
// the role's whole sandbox (bwrap, prlimit, the uid drop, a fresh /proc, its work dir read back
// through /proc). If it fails, the worker refuses to start with a message naming what is missing.
import { readFile } from 'node:fs/promises';
import { ConfigError } from '../../errors.ts';
import { SANDBOX_TOOL_NAMES } from '../roles.ts';
import { findSandboxBinaries, type SandboxBinaries } from './binaries.ts';
import { SANDBOX_UID } from './command.ts';
import type { SandboxConfig } from './config.ts';
import { runSandboxed } from './run.ts';
import { createWorkDir, readRegularFile, removeWorkDir } from './workdir.ts';

/** The sandbox cannot run here: a ConfigError, so the worker exits 78 and is not restarted in a loop. */
export class SandboxUnavailableError extends ConfigError {}

const HOW_TO_NONE = 'or set the role\'s sandbox.mode to "none" to run code WITHOUT isolation';

/** Whether a role's tools run code (run_code / run_tests). */
export function usesSandbox(role: { tools: readonly string[] }): boolean {
  return role.tools.some((t) => (SANDBOX_TOOL_NAMES as readonly string[]).includes(t));
}

/** bubblewrap's complaint, in words an operator acts on. */
export function explainBwrapFailure(stderr: string): string {
  const said = stderr.trim().split('\n').slice(-3).join(' | ');
  if (
    /max_\*_namespaces|ENOSPC|No permissions to creat|unprivileged_userns|setting up uid map|new namespace/i.test(said)
  ) {
    return (
      'user namespaces are disabled or not allowed for this user (check /proc/sys/user/max_user_namespaces, ' +
      `kernel.unprivileged_userns_clone, kernel.apparmor_restrict_unprivileged_userns): bwrap said: ${said}`
    );
  }
  if (/Can't mount proc/i.test(said)) {
    return (
      'a new /proc cannot be mounted (common in containers whose /proc is partly masked: give the pod ' +
      `procMount: Unmasked, or run the worker where /proc is fully visible): bwrap said: ${said}`
    );
  }
  return `the probe run failed: ${said || 'no message'}`;
}

async function userNamespacesOff(): Promise<boolean> {
  const max = await readFile('/proc/sys/user/max_user_namespaces', 'utf8').catch(() => null);
  return max !== null && Number(max.trim()) === 0;
}

/** What is missing for `mode`, before any run: binaries, then user namespaces. */
async function missingPieces(mode: SandboxConfig['mode'], bins: SandboxBinaries): Promise<string[]> {
  const missing: string[] = [];
  if (mode === 'bwrap' && !bins.bwrap) missing.push('bwrap is not installed (Debian package bubblewrap)');
  if (!bins.prlimit) missing.push('prlimit is not installed (Debian package util-linux)');
  else if (mode === 'bwrap' && !/^\/(usr|bin|sbin)\//.test(bins.prlimit)) {
    missing.push(`prlimit at ${bins.prlimit} is not under /usr, so the sandbox cannot see it`);
  }
  if (mode === 'bwrap' && (await userNamespacesOff())) {
    missing.push('user namespaces are disabled (/proc/sys/user/max_user_namespaces is 0)');
  }
  return missing;
}

const PROBE_FILE = 'probe.txt';
const PROBE_TEXT = 'deepq-probe';

/** '' when the probe's file reads back as written, else what went wrong, for an operator. */
async function readProbeFile(dir: string): Promise<string> {
  const text = await readRegularFile(dir, PROBE_FILE, 1024).then(String, (err: Error) => err.message);
  if (text === `${PROBE_TEXT}\n`) return '';
  return (
    `the worker cannot read what a program writes in the sandbox's work dir (at ${dir}: a /proc mounted ` +
    `with hidepid, or access to another process's root refused, stops it): ${text.trim().slice(0, 200)}`
  );
}

/**
 * Runs a program that writes a file in the sandbox `limits` describe, and reads the file back;
 * throws SandboxUnavailableError naming what is missing. Returns a warning for mode none (the
 * caller logs it).
 */
export async function probeSandbox(
  role: string,
  limits: SandboxConfig,
  bins: SandboxBinaries = findSandboxBinaries(),
): Promise<{ warning?: string }> {
  const refuse = (why: string[]) =>
    new SandboxUnavailableError(
      `role ${role} runs code (run_code/run_tests) but its sandbox (mode ${limits.mode}) cannot run here: ` +
        `${why.join('; ')}. Install what is missing, ${HOW_TO_NONE}`,
    );
  const missing = await missingPieces(limits.mode, bins);
  if (missing.length) throw refuse(missing);
  const root = process.getuid?.() === 0;
  const wd = await createWorkDir(root ? { uid: SANDBOX_UID, gid: SANDBOX_UID } : null);
  try {
    const probeLimits = { ...limits, wallSeconds: 15 };
    let readBack = 'the sandbox ended before its work dir could be read';
    const r = await runSandboxed({
      argv: ['sh', '-c', `echo ${PROBE_TEXT} > ${PROBE_FILE}`],
      workDir: wd.path,
      limits: probeLimits,
      binaries: bins,
      afterRun: async (dir) => {
        if (dir !== null) readBack = await readProbeFile(dir);
      },
    });
    if (r.outcome !== 'ok') throw refuse([r.error ?? explainBwrapFailure(r.stderr.text())]);
    if (readBack !== '') throw refuse([readBack]);
  } finally {
    await removeWorkDir(wd.path);
  }
  if (limits.mode === 'none') {
    return { warning: `role ${role}: sandbox.mode is "none": run_code runs WITHOUT isolation (a warning per call)` };
  }
  return {};
}
