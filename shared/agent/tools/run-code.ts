// run_code and run_tests: a program over copies of chosen artifacts, run in the role's sandbox
// (shared/agent/sandbox/). Names are untrusted: checked by the artifact-name rule before any
// path is built, and files are saved back only when named, only as regular files inside the
// work dir. The result's first line says whether a limit was hit and which.
import { z } from 'zod';
import { ErrorCode, hasCode } from '../../errors.ts';
import type { Metrics } from '../../runtime/metrics.ts';
import { ArtifactNameSchema } from '../../vfs/artifact-name.ts';
import type { VirtualFs } from '../../vfs/vfs.ts';
import type { SandboxBinaries } from '../sandbox/binaries.ts';
import { SANDBOX_UID } from '../sandbox/command.ts';
import type { SandboxConfig } from '../sandbox/config.ts';
import { runSandboxed, type SandboxResult } from '../sandbox/run.ts';
import { createWorkDir, putFile, readRegularFile, removeWorkDir, sha256, walkWorkDir } from '../sandbox/workdir.ts';
import {
  bindTool,
  defineTool,
  type Tool,
  type ToolContext,
  type ToolScope,
  type ToolSpec,
  toolContext,
} from './registry.ts';
import { formatRun, type RunReport } from './run-report.ts';
import { toolWriteMeta } from './vfs-tools.ts';

export interface SandboxToolDeps {
  vfs: VirtualFs;
  limits: SandboxConfig;
  metrics?: Metrics;
  /** bwrap and prlimit (default: found on the worker's PATH at each run). */
  binaries?: SandboxBinaries;
}

/** The program file's name in the work dir: a leading dot, which no artifact name can have. */
const PROGRAM_PREFIX = '.run_code';
const LANGUAGES = {
  python: { file: `${PROGRAM_PREFIX}.py`, argv: (f: string) => ['python3', f] },
  node: { file: `${PROGRAM_PREFIX}.js`, argv: (f: string) => ['node', f] },
  shell: { file: `${PROGRAM_PREFIX}.sh`, argv: (f: string) => ['bash', f] },
} as const;
const MAX_FILES = 100;
const MAX_SAVES = 20;

const Files = z
  .array(ArtifactNameSchema)
  .max(MAX_FILES)
  .default([])
  .describe('Artifacts of this goal copied into the work dir first, at the same relative path (e.g. "src/app.py").');
const Save = z
  .array(ArtifactNameSchema)
  .max(MAX_SAVES)
  .default([])
  .describe('Files the run writes (paths relative to the work dir) to keep as artifacts of this goal, same names.');

const RunCodeInput = z
  .object({
    language: z.enum(['python', 'node', 'shell']).describe('python3, node, or a bash script.'),
    code: z.string().min(1, 'code must not be empty').max(200_000).describe('The program, run in the work dir.'),
    files: Files,
    save: Save,
    stdin: z.string().max(1_000_000).optional().describe('Text given to the program on stdin.'),
  })
  .strict();

const RunTestsInput = z
  .object({
    command: z
      .string()
      .min(1)
      .max(10_000)
      .optional()
      .describe(
        'The shell command that runs the tests. Default: "python3 -m unittest discover -v" when a .py file ' +
          'is given, else "node --test".',
      ),
    files: Files.refine((f) => f.length > 0, 'files must name the code and its tests'),
    save: Save,
  })
  .strict();

/** What one run needs: the program (a file in the work dir) and the artifacts around it. */
interface RunJob {
  tool: string;
  language: string;
  program: { file: string; content: string };
  argv: string[];
  files: string[];
  save: string[];
  stdin?: string;
}

const missingInput = (name: string) => new Error(`no such file: ${name} (files must name artifacts of this goal)`);

/**
 * The input artifacts, read only once their total size (from the index) fits the work dir's
 * limit: a call naming too much is refused without reading any of it. A missing one fails the
 * call before anything runs.
 */
async function readInputs(
  vfs: VirtualFs,
  goalId: string,
  names: string[],
  limits: SandboxConfig,
): Promise<Map<string, string>> {
  const unique = [...new Set(names)];
  let indexed = 0;
  for (const name of unique) {
    vfs.check(name, '');
    const e = await vfs.stat(goalId, name);
    if (e === null || e.status === 'evicted') throw missingInput(name);
    indexed += e.bytes;
  }
  checkInputSize(indexed, limits);
  const out = new Map<string, string>();
  let bytes = 0;
  for (const name of unique) {
    const content = await vfs.read(goalId, name);
    if (content === null) throw missingInput(name);
    out.set(name, content);
    bytes += Buffer.byteLength(content);
  }
  checkInputSize(bytes, limits); // a write since the stat may have grown one
  return out;
}

/** The copies must fit in the work dir's limit: refused before anything is written. */
function checkInputSize(bytes: number, limits: SandboxConfig): void {
  if (bytes > limits.fileBytes) {
    throw new Error(`files hold ${bytes} bytes in all, over the sandbox's ${limits.fileBytes}: name fewer files`);
  }
}

function limitsFor(deps: SandboxToolDeps): string {
  const l = deps.limits;
  return (
    `Limits: ${l.wallSeconds} s wall time, ${l.cpuSeconds} s CPU, ${l.memoryMb} MiB memory per process, ` +
    `${l.maxProcesses} processes, ${Math.round(l.outputBytes / 1024)} KiB of output, ` +
    `${Math.round(l.fileBytes / 1024 / 1024)} MiB of files. No network.`
  );
}

/** The run: work dir, inputs, sandbox, metrics, what changed, what is saved; the dir always goes. */
async function runJob(deps: SandboxToolDeps, ctx: ToolContext, job: RunJob): Promise<string> {
  const { inputs, wd } = await countedIfFails(deps, ctx, () => prepare(deps, ctx, job));
  try {
    let report: RunReport | undefined;
    // Counted before the save: a save refused (the job's lock lost) still leaves the run counted.
    let counted = false;
    const countOnce = (r: SandboxResult) => {
      if (!counted) count(deps, ctx, r);
      counted = true;
    };
    const res = await runSandboxed({
      argv: job.argv,
      workDir: wd.path,
      limits: deps.limits,
      stdin: job.stdin,
      signal: ctx.signal,
      log: ctx.log,
      binaries: deps.binaries,
      // Under bubblewrap the work dir is inside the sandbox: read while the sandbox still holds it.
      afterRun: async (dir, res) => {
        countOnce(res);
        report = await reportOf(deps, ctx, dir, inputs, job, res);
      },
    });
    countOnce(res);
    if (res.aborted) throw new Error(`${job.tool} was killed: the job was aborted`);
    if (res.error !== undefined || !report) throw new Error(`${job.tool} could not run: ${res.error}`);
    return formatRun(report);
  } finally {
    await dropWorkDir(ctx, wd.path);
  }
}

/** Before the program starts: the inputs read and checked, a work dir holding them and the program. */
async function prepare(deps: SandboxToolDeps, ctx: ToolContext, job: RunJob) {
  const inputs = await readInputs(deps.vfs, ctx.goalId, job.files, deps.limits);
  const root = process.getuid?.() === 0;
  const wd = await createWorkDir(root ? { uid: SANDBOX_UID, gid: SANDBOX_UID } : null);
  try {
    for (const [name, content] of inputs) {
      await putFile(wd, name, content).catch((err: NodeJS.ErrnoException) => {
        throw new Error(`cannot place ${name} in the work dir: ${err.code ?? err.message}`);
      });
    }
    await putFile(wd, job.program.file, job.program.content);
  } catch (err) {
    await dropWorkDir(ctx, wd.path);
    throw err;
  }
  return { inputs, wd };
}

function dropWorkDir(ctx: ToolContext, dir: string): Promise<void> {
  return removeWorkDir(dir).catch((err) => ctx.log.warn({ err, dir }, 'work dir not removed'));
}

/**
 * The steps before the program starts (inputs missing or too large, the work dir not made): their
 * failure is a run that could not happen, counted `error` like a spawn failure, then rethrown.
 */
async function countedIfFails<T>(deps: SandboxToolDeps, ctx: ToolContext, step: () => Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (err) {
    deps.metrics?.sandboxRuns.inc({ role: ctx.role, outcome: 'error' });
    ctx.log.info({ outcome: 'error', err: (err as Error).message }, 'sandbox run not started');
    throw err;
  }
}

function count(deps: SandboxToolDeps, ctx: ToolContext, res: SandboxResult): void {
  deps.metrics?.sandboxRuns.inc({ role: ctx.role, outcome: res.outcome });
  deps.metrics?.sandboxSeconds.observe({ role: ctx.role }, res.seconds);
  ctx.log.info({ outcome: res.outcome, limit: res.limit?.kind, code: res.code, seconds: res.seconds }, 'sandbox run');
}

/** Files created, changed or deleted (the program file left out), then the ones to save, saved. */
async function reportOf(
  deps: SandboxToolDeps,
  ctx: ToolContext,
  dir: string | null,
  inputs: Map<string, string>,
  job: RunJob,
  res: SandboxResult,
): Promise<RunReport> {
  // The sandbox went before its work dir could be read: the verdict alone, no file listed or lost.
  const walk = dir === null ? { entries: [], bytes: 0, truncated: true, dirs: [] } : await walkWorkDir(dir);
  const changed: RunReport['changed'] = [];
  for (const e of walk.entries) {
    if (e.name === job.program.file) continue;
    const before = inputs.get(e.name);
    if (before === undefined) changed.push({ ...e, how: 'created' });
    else if (e.kind !== 'file' || e.bytes !== Buffer.byteLength(before) || (await changedContent(dir!, e.name, before)))
      changed.push({ ...e, how: 'changed' });
  }
  const seen = new Set(walk.entries.map((e) => e.name));
  for (const name of inputs.keys()) {
    if (!seen.has(name) && !walk.truncated) changed.push({ name, kind: 'file', bytes: 0, disk: 0, how: 'deleted' });
  }
  const saved = [];
  for (const name of new Set(job.save)) saved.push(await saveOne(deps, ctx, dir, name));
  const workDirLost = dir === null;
  return { tool: job.tool, language: job.language, mode: deps.limits.mode, res, changed, walk, workDirLost, saved };
}

async function changedContent(dir: string, name: string, before: string): Promise<boolean> {
  const now = await readRegularFile(dir, name, Number.MAX_SAFE_INTEGER).catch(() => null);
  return now === null || sha256(now) !== sha256(before);
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** One named file back into the goal's VFS, or the reason it was not. */
async function saveOne(deps: SandboxToolDeps, ctx: ToolContext, dir: string | null, name: string) {
  try {
    if (dir === null) throw new Error('the sandbox ended before its work dir could be read');
    const max = Math.min(deps.limits.fileBytes, deps.vfs.opts.maxArtifactBytes);
    const buf = await readRegularFile(dir, name, max);
    let text: string;
    try {
      text = utf8.decode(buf);
    } catch {
      throw new Error(`${name} is not UTF-8 text: artifacts are text`);
    }
    const e = await deps.vfs.write(ctx.goalId, name, text, toolWriteMeta(ctx, name));
    return { name, ok: true as const, bytes: e.bytes, version: e.version };
  } catch (err) {
    // Another worker runs the job now: the run ends (create-agent's runTool), not the model's turn.
    if (hasCode(err, ErrorCode.LockLost)) throw err;
    return { name, ok: false as const, reason: (err as Error).message };
  }
}

export function runCodeTool(deps: SandboxToolDeps): ToolSpec {
  return defineTool({
    name: 'run_code',
    description:
      'Run a program (python3, node, or a bash script) in a sandbox, in a fresh work dir holding copies of the ' +
      'artifacts named in files. Returns the exit code (the first line says when a limit was hit and which), ' +
      'the end of stdout and stderr, and the files the run created, changed or deleted; files named in save become ' +
      `artifacts of this goal. ${limitsFor(deps)}`,
    input: RunCodeInput,
    async run({ language, code, files, save, stdin }, ctx) {
      const lang = LANGUAGES[language];
      const program = { file: lang.file, content: code };
      return runJob(deps, ctx, { tool: 'run_code', language, program, argv: lang.argv(lang.file), files, save, stdin });
    },
  });
}

/** The default test command for the files given: Python's unittest, else node's test runner. */
export function defaultTestCommand(files: string[]): string {
  if (files.some((f) => f.endsWith('.py'))) return 'python3 -m unittest discover -v';
  if (files.some((f) => /\.(c|m)?js$/.test(f))) return 'node --test';
  throw new Error('no default test command for these files (no .py or .js): give command');
}

export function runTestsTool(deps: SandboxToolDeps): ToolSpec {
  return defineTool({
    name: 'run_tests',
    description:
      'Run tests in a sandbox over copies of the artifacts named in files: command (default ' +
      '"python3 -m unittest discover -v" for Python files, else "node --test") runs in the work dir. Returns ' +
      'the exit code (first line: any limit hit), the end of the output and the files created, changed or ' +
      'deleted. ' +
      limitsFor(deps),
    input: RunTestsInput,
    async run({ command, files, save }, ctx) {
      const shell = LANGUAGES.shell;
      const program = { file: shell.file, content: command ?? defaultTestCommand(files) };
      return runJob(deps, ctx, {
        tool: 'run_tests',
        language: 'shell',
        program,
        argv: shell.argv(shell.file),
        files,
        save,
      });
    },
  });
}

/** The sandbox tools a role names, as specs (bound by the caller to a job). */
export function sandboxToolSpecs(deps: SandboxToolDeps, names: readonly string[]): ToolSpec[] {
  const specs: Record<string, () => ToolSpec> = {
    run_code: () => runCodeTool(deps),
    run_tests: () => runTestsTool(deps),
  };
  return names.filter((n) => n in specs).map((n) => specs[n]!());
}

/** A job's sandbox tools: the role's run_code / run_tests bound to its scope, signal and logger. */
export function createSandboxTools(
  deps: SandboxToolDeps,
  scope: ToolScope,
  names: readonly string[],
  opts: { signal?: AbortSignal; log?: ToolContext['log'] } = {},
): Tool[] {
  const specs = sandboxToolSpecs(deps, names);
  if (!specs.length) return [];
  const ctx = toolContext(scope, opts);
  return specs.map((spec) => bindTool(spec, ctx));
}
