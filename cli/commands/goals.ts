// The commands about goals: enqueue, status, watch, artifacts, cancel, resume and goals.
// Registered in this order, which is the order `deepq --help` lists them in. Goal text,
// reasons and names are printed with their control characters escaped (print does it; cells
// that are padded are escaped first, so columns stay aligned), JSON with printJson. What only an
// action uses is imported in it: `deepq --help` must not load zod and the goal store.

import { join } from 'node:path';
import { type Command, Option } from 'commander';
import { ValidationError } from '../../shared/errors.ts';
import { GOAL_STATUSES } from '../../shared/goal/status.ts';
import { inGoalTrace } from '../../shared/runtime/tracing.ts';
import { dir, int, MAX_SECONDS, num, onBudget } from '../args.ts';
import { client, connection, reader } from '../connect.ts';
import type { GoalClient } from '../goal-client.ts';
import type { GoalReader } from '../goal-reader.ts';
import { clip, safeLine } from '../terminal.ts';
import { approvalLines } from './approvals.ts';
import { follow, print, printJson } from './output.ts';

export function registerGoalCommands(program: Command): void {
  registerEnqueue(program);
  registerStatus(program);
  program
    .command('watch')
    .description('follow a goal live until it is terminal or awaits a human; exit 0 only when it is done')
    .argument('<goalId>')
    .addOption(redisTimeout())
    .action(async (goalId: string, o) => {
      const c = await client();
      await c.get(goalId);
      const status = await follow(c, goalId, process.stdout.isTTY ? 'tree' : 'lines', o.redisTimeout);
      if (status === 'awaiting_human') await tellPause(c, goalId);
      process.exitCode = status === 'done' ? 0 : 1;
    });
  registerArtifacts(program);
  program
    .command('cancel')
    .description('cancel a goal across all processes')
    .argument('<goalId>')
    .action(async (goalId: string) => {
      // The goal stops first (its move and the cancel message), then BullMQ is loaded to remove
      // its waiting jobs: a cancel reaches the running calls without waiting for that load.
      const { cfg, redis } = await connection();
      const moved = await (await import('../stop-goal.ts')).stopGoal(redis, cfg, goalId);
      const c = await client();
      // Traced from here (the client starts tracing): the stop itself does not wait for that load.
      const attrs = { 'deepq.goal.id': goalId, 'deepq.cancelled': moved };
      const status = await inGoalTrace(goalId, 'deepq cancel', attrs, () => c.clearStopped(goalId));
      print(moved ? `cancelled ${goalId}` : `goal ${goalId} is already ${status}`);
    });
  program
    .command('resume')
    .description('carry on a goal awaiting a human')
    .argument('<goalId>')
    .option('--note <text>', 'a note for the planner (always re-plans)')
    .option('--file <path>', 'a text file to give the goal (repeatable; always re-plans): an input artifact', collect)
    .option('--end', 'end it as done instead: its work is finished (after a review or an escalation)')
    .option('--max-tokens <n>', 'raise the token budget to n', int('--max-tokens'))
    .option('--max-steps <n>', 'raise the cycle budget to n', int('--max-steps'))
    .option('--max-seconds <n>', 'give it n more seconds from now', num('--max-seconds', MAX_SECONDS))
    .action(async (goalId: string, o) => {
      const raise = { maxTokens: o.maxTokens, maxSteps: o.maxSteps, maxSeconds: o.maxSeconds };
      const raised = Object.values(raise).some((v) => v !== undefined);
      if (o.end && (o.note !== undefined || raised || o.file))
        throw new ValidationError('--end ends the goal: it takes no --note, --file nor a raised budget');
      // An empty note would resume without re-planning, where --note promises a re-plan.
      if (o.note !== undefined && !o.note.trim())
        throw new ValidationError('--note is empty: give the planner a note, or leave --note out');
      const c = await client();
      const { readInputFiles } = await import('../input-files.ts');
      const files = readInputFiles(o.file ?? [], c.cfg.vfs.maxArtifactBytes);
      const r = o.end ? await c.endAsDone(goalId) : await c.resume(goalId, { note: o.note, raise, files });
      print(`resumed ${goalId}: ${r.action} (status ${r.status})`);
    });
  registerGoals(program);
}

/** `watch` and `enqueue --wait`: how long to keep retrying without Redis before exiting 1. */
const redisTimeout = () =>
  new Option('--redis-timeout <seconds>', 'without Redis this long, stop following and exit 1 (default 60)')
    // Milliseconds from here on; at most a day (a timer holds at most ~24 days).
    .argParser((v: string) => num('--redis-timeout', 86_400)(v) * 1000);

function registerEnqueue(program: Command): void {
  program
    .command('enqueue')
    .description('submit a goal; prints its id')
    .argument('<goal>', 'the goal text')
    .option('--wait', 'wait until the goal is terminal or awaits a human; exit 0 only when it is done')
    .option('--json', 'print the status object as the last line')
    .option('--review', 'pause in awaiting_human after every reflection')
    .option('--max-tokens <n>', 'token budget', int('--max-tokens'))
    .option('--max-steps <n>', 'cycle budget', int('--max-steps'))
    .option('--max-seconds <n>', 'wall-clock budget', num('--max-seconds', MAX_SECONDS))
    .option('--on-budget <mode>', 'at a budget: end (the default) or pause until resumed with more', onBudget)
    .option('--file <path>', 'a text file the agents start with (repeatable): an artifact of the goal', collect)
    .option('--key <key>', 'idempotency key: the same request again prints the same goal, adds nothing')
    .addOption(redisTimeout())
    .action(async (goal: string, o) => {
      const c = await client();
      const budgets = { maxTokens: o.maxTokens, maxSteps: o.maxSteps, maxSeconds: o.maxSeconds, onBudget: o.onBudget };
      const { readInputFiles } = await import('../input-files.ts');
      const files = readInputFiles(o.file ?? [], c.cfg.vfs.maxArtifactBytes);
      const { goalId, created } = await c.submit({ goal, review: !!o.review, budgets, files, key: o.key });
      if (!created) process.stderr.write(`deepq: goal ${goalId} was already submitted with this key\n`);
      // With --json --wait the status object is the only output.
      if (!o.json || !o.wait) print(goalId);
      let status = 'queued';
      const mode = o.json ? 'none' : process.stdout.isTTY ? 'tree' : 'lines';
      if (o.wait) status = await follow(c, goalId, mode, o.redisTimeout);
      if (o.json) printJson(await c.summary(goalId));
      else if (status === 'awaiting_human') await tellPause(c, goalId);
      process.exitCode = o.wait && status !== 'done' ? 1 : 0;
    });
}

/** A follow that stopped at a pause says what answers it (the timeline says why it paused). */
async function tellPause(c: GoalReader, goalId: string): Promise<void> {
  const line = (await import('../budget-status.ts')).pauseLine(await c.get(goalId));
  if (line) print(line);
}

/** A repeatable option's values, in order. */
const collect = (value: string, previous: string[] | undefined) => [...(previous ?? []), value];

function registerStatus(program: Command): void {
  program
    .command('status')
    .description('show a goal: status, step, tokens, estimated cost')
    .argument('<goalId>')
    .option('--json', 'print the status object')
    .action(async (goalId: string, o) => {
      const c = await reader();
      const s = await c.summary(goalId);
      if (o.json) {
        printJson(s);
        return;
      }
      await printStatus(c, goalId, s.artifacts);
    });
}

async function printStatus(c: GoalReader, goalId: string, artifacts: string[]): Promise<void> {
  const [{ estimateCost, formatCost }, { totalTokens }] = await Promise.all([
    import('../../shared/goal/cost.ts'),
    import('../../shared/goal/store.ts'),
  ]);
  const g = await c.get(goalId);
  const waiting = await c.pendingApprovals(goalId);
  const t = g.tokens;
  print(`goal      ${g.goalId}: ${clip(g.goal, 100)}`);
  // A running goal whose subtask waits for a human makes no progress until someone decides.
  const paused = waiting.length ? ` (waiting for approval: ${waiting.length} tool call(s))` : '';
  print(`status    ${g.status}${paused}${g.reason ? ` (${g.reason})` : ''}`);
  print(`step      ${g.step} (depth ${g.depth})`);
  print(
    `tokens    ${totalTokens(t)} (input ${t.input}, output ${t.output}, ` +
      `cache read ${t.cache_read}, cache write ${t.cache_write})`,
  );
  const { modelCostLines, usageColumnWidth, usageLabel } = await import('../cost-status.ts');
  const width = usageColumnWidth(g);
  for (const [k, u] of Object.entries(g.usage)) {
    // An endpoint that reports no usage is estimated: said on its line.
    const estimated = g.estimatedUsage.includes(k) ? ' (estimated)' : '';
    print(
      `  ${usageLabel(k).padEnd(width)} in ${u.input} out ${u.output} ` +
        `cache r/w ${u.cache_read}/${u.cache_write}${estimated}`,
    );
  }
  print(`cost      ${safeLine(formatCost(estimateCost(g, c.cfg.prices), { approx: true, models: true }))}`);
  for (const line of modelCostLines(g, c.cfg.prices, width)) print(line);
  print(`artifacts ${artifacts.join(', ') || '(none)'}`);
  const finished = g.finishedAt ? `  finished ${new Date(g.finishedAt).toISOString()}` : '';
  print(`created   ${new Date(g.createdAt).toISOString()}${finished}`);
  for (const line of (await import('../budget-status.ts')).budgetStatusLines(g)) print(line);
  if (!waiting.length) return;
  print(`approvals ${waiting.length} tool call(s) wait for a human: deepq approve|reject ${goalId} <callId>`);
  for (const r of waiting) for (const line of approvalLines(r)) print(`  ${line}`);
}

function registerArtifacts(program: Command): void {
  program
    .command('artifacts')
    .description("list a goal's artifacts, or write each to DIR")
    .argument('<goalId>')
    .option('--out <dir>', 'write each artifact into this directory', dir('--out'))
    .action(async (goalId: string, o) => {
      const c = await client();
      const files = await c.artifacts(goalId);
      if (!files.length) print('(no artifacts)');
      else if (o.out) await writeArtifacts(c, goalId, files, o.out);
      else {
        for (const f of files) {
          const size = `${String(f.bytes).padStart(9)} B`;
          const name = safeLine(f.name).padEnd(32);
          const writer = f.input ? 'input' : (f.role ?? '');
          print(`${name} ${f.status.padEnd(7)} ${size}  step ${f.step}  ${writer}  v${f.version}`);
        }
      }
    });
}

/** `--out DIR`: all or nothing, refusing colliding names before anything is written. */
async function writeArtifacts(c: GoalClient, goalId: string, files: { name: string }[], out: string): Promise<void> {
  const { exportArtifacts, planExport } = await import('./artifacts-out.ts');
  const plan = planExport(files.map((f) => f.name));
  // A name that could escape the directory is never written (deepq never stores one).
  for (const s of plan.skipped)
    process.stderr.write(`${safeLine(`deepq: skipped artifact ${JSON.stringify(s.name)}: ${s.problem}`)}\n`);
  const written = await exportArtifacts(out, plan, (name) => c.read(goalId, name));
  for (const w of written) print(`${join(out, w.rel)}  (${w.bytes} bytes)`);
}

/** Column widths of the `goals` table; the goal text runs on unpadded at the end. */
const GOAL_COLUMNS = [14, 16, 6, 10, 25, 8];

/** The rows as a table: each column at least its usual width, wider where a cell needs it (a keyed goal's id). */
function goalTable(rows: string[][]): string[] {
  const cells = rows.map((r) => r.map((c) => safeLine(c)));
  const widths = GOAL_COLUMNS.map((w, i) => Math.max(w, ...cells.map((r) => (r[i]?.length ?? 0) + 2)));
  return cells.map((r) => r.map((c, i) => c.padEnd(widths[i] ?? 0)).join(''));
}

/** How many goals `deepq goals` lists, newest first. */
const GOALS_SHOWN = 1000;

function registerGoals(program: Command): void {
  program
    .command('goals')
    .description('list goals')
    .addOption(new Option('--status <status>', 'only goals in this status').choices(GOAL_STATUSES))
    .option('--json', 'print JSON')
    .action(async (o) => {
      // One more than shown: whether the list is cut.
      const rows = await (await client()).list(o.status, GOALS_SHOWN + 1);
      if (rows.length > GOALS_SHOWN) {
        rows.length = GOALS_SHOWN;
        const which = o.status ? `goals in status ${o.status}` : 'goals (--status S narrows the list)';
        process.stderr.write(`deepq: showing the newest ${GOALS_SHOWN} ${which}; older ones are not listed\n`);
      }
      if (o.json) {
        printJson(rows);
        return;
      }
      const cells = rows.map((r) => [
        r.goalId,
        r.status,
        String(r.step),
        String(r.tokens),
        r.cost,
        `${r.ageSeconds}s`,
        r.goal,
      ]);
      for (const line of goalTable([['GOAL', 'STATUS', 'STEP', 'TOKENS', 'COST', 'AGE', 'TEXT'], ...cells]))
        print(line);
    });
}
