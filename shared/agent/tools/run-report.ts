// The text a run_code / run_tests call returns. The first line is the verdict: the limit hit
// (if any), else the exit code; then the ends of stdout and stderr, the files the run created
// or changed, and what was saved. Small on purpose: a run that printed 50 MB reads as a tail.

import { exitSignal } from '../sandbox/outcome.ts';
import type { SandboxResult } from '../sandbox/run.ts';
import type { Walk, WalkEntry } from '../sandbox/workdir.ts';

/** Changed files listed at most; the rest are counted. */
const MAX_LISTED = 50;

export interface RunReport {
  tool: string;
  language: string;
  mode: 'bwrap' | 'none';
  res: SandboxResult;
  changed: (WalkEntry & { how: 'created' | 'changed' | 'deleted' })[];
  walk: Walk;
  /** The sandbox ended before its work dir could be read (bwrap failed, its keeper was killed). */
  workDirLost?: boolean;
  saved: ({ name: string; ok: true; bytes: number; version: number } | { name: string; ok: false; reason: string })[];
}

/** `exit 0`, `exit 3`, or `killed by SIGSEGV` (bubblewrap's 128+N read as signal N). */
function exitText(res: SandboxResult): string {
  const sig = exitSignal(res);
  if (sig) return `killed by ${sig}`;
  return `exit ${res.code ?? '?'}`;
}

export function verdictLine(res: SandboxResult): string {
  if (!res.limit) return exitText(res);
  const kind = res.limit.kind;
  const how = !res.limit.atEnd && (kind === 'wall' || kind === 'output' || kind === 'files');
  return `limit hit: ${res.limit.text}${how ? ', the run was killed' : `; ${exitText(res)}`}`;
}

function streamSection(name: string, tail: SandboxResult['stdout']): string[] {
  if (tail.total === 0) return [`--- ${name}: (empty) ---`];
  const cut = tail.dropped() ? `, last ${tail.total - tail.dropped()} of ${tail.total} bytes` : '';
  return [`--- ${name}${cut} ---`, tail.text().replace(/\n$/, '')];
}

function filesSection(r: RunReport): string[] {
  if (r.workDirLost) return ['--- files: not read (the sandbox ended before its work dir could be read) ---'];
  if (r.changed.length === 0) return ['--- files created, changed or deleted: none ---'];
  const lines = r.changed.slice(0, MAX_LISTED).map((f) => {
    if (f.how === 'deleted') return `${f.name} (deleted)`;
    const what = f.kind === 'file' ? `${f.bytes} bytes` : f.kind === 'symlink' ? 'symlink' : 'not a regular file';
    return `${f.name} (${what}, ${f.how})`;
  });
  if (r.changed.length > MAX_LISTED) lines.push(`… and ${r.changed.length - MAX_LISTED} more`);
  if (r.walk.truncated) lines.push('(the work dir was too large to list in full)');
  return ['--- files created, changed or deleted ---', ...lines];
}

function savedSection(r: RunReport): string[] {
  if (r.saved.length === 0) return [];
  const lines = r.saved.map((s) =>
    s.ok ? `${s.name} (${s.bytes} bytes, version ${s.version})` : `${s.name}: NOT saved: ${s.reason}`,
  );
  return ['--- saved as artifacts ---', ...lines];
}

export function formatRun(r: RunReport): string {
  const where = r.mode === 'none' ? 'NO isolation (sandbox mode none)' : 'sandbox bwrap';
  const how = `${r.tool}: ${r.language}, ${r.res.seconds.toFixed(2)} s, ${where}`;
  return [
    verdictLine(r.res),
    how,
    ...streamSection('stdout', r.res.stdout),
    ...streamSection('stderr', r.res.stderr),
    ...filesSection(r),
    ...savedSection(r),
  ].join('\n');
}
