// What the planner is told: its system prompt (the roles it may assign) and, per cycle, the
// goal, the file index (never contents), the finished work to keep, the last cycle's failures
// and partial results, the prior plan, the last reflection, what is left of each budget and
// what each role has cost per subtask so far, and any note.
import { type AgentSpec, coordinatorSpec } from '../../shared/agent/roles.ts';
import { budgetLeft } from '../../shared/goal/budgets.ts';
import type { CycleOutcome } from '../../shared/goal/progress.ts';
import type { GoalRecord } from '../../shared/goal/store.ts';
import { totalTokens } from '../../shared/goal/store.ts';
import { type Config, roleNames } from '../../shared/runtime/config.ts';
import { type FileEntry, formatIndex } from '../../shared/vfs/vfs.ts';
import type { PlanBudget } from './plan-contract.ts';

export function plannerPrompt(roles: string[]): string {
  return (
    "You are the planner. Decompose the user's goal into 1-5 subtasks assigned to the " +
    `available roles: ${roles.join(', ')}.\n` +
    'Return ONLY JSON: {"subtasks": [{"role": str, "instruction": str, "expected_artifact": str, ' +
    '"read_files": [str], "token_cap": int (optional)}]}. Artifact names are unique within the plan; ' +
    'read_files may only name files that exist in the index. Artifacts that are done are finished ' +
    'work: keep them, and plan only what is missing or failed; plan a done artifact again only when ' +
    'the last reflection asks to revise it. token_cap is the most tokens a subtask may use, input ' +
    '(its prompt, tools and files) and output together; keep the ' +
    "plan's cost within the budget left. Files marked input came from the user (with the goal or a resume): " +
    'name them in read_files of the subtasks that need them, never as an expected_artifact. ' +
    'Do not execute subtasks. Do not write file contents.'
  );
}

const specs = new WeakMap<Config, AgentSpec>();

/** Built once per config (a process has one): validating it per job was a planner hot spot. */
export function plannerSpec(cfg: Config): AgentSpec {
  let spec = specs.get(cfg);
  if (!spec) {
    spec = coordinatorSpec(
      { systemPrompt: plannerPrompt(roleNames(cfg)), tier: 'HIGH', contract: 'plan' },
      cfg.planner,
    );
    specs.set(cfg, spec);
  }
  return spec;
}

/** Average tokens per subtask of each role that has run in this goal. */
export function costPerSubtask(goal: Pick<GoalRecord, 'usage' | 'subtasksByRole'>): Record<string, number> {
  const tokens: Record<string, number> = {};
  for (const [key, u] of Object.entries(goal.usage)) {
    const role = key.split('|')[0] ?? '';
    tokens[role] = (tokens[role] ?? 0) + totalTokens(u);
  }
  const out: Record<string, number> = {};
  for (const [role, n] of Object.entries(goal.subtasksByRole)) {
    if (n > 0 && tokens[role]) out[role] = Math.round(tokens[role] / n);
  }
  return out;
}

/** The tokens left and the costs per subtask, when the goal has a token budget. */
export function planBudgetOf(goal: GoalRecord): PlanBudget | undefined {
  const max = goal.budgets.maxTokens;
  if (max === undefined) return undefined;
  return { tokensLeft: Math.max(0, max - totalTokens(goal.tokens)), perSubtask: costPerSubtask(goal) };
}

export function plannerMessage(goal: GoalRecord, step: number, index: FileEntry[], now = Date.now()): string {
  const reflection = goal.reflection
    ? JSON.stringify({ decision: goal.reflection.decision, reason: goal.reflection.reason })
    : '(none)';
  return [
    `Goal: ${goal.goal}`,
    `Cycle: ${step}`,
    `Current files:\n${formatIndex(index)}`,
    ...resumeInputs(index, step),
    ...keptWork(goal, index),
    `Prior plan: ${goal.plan ? JSON.stringify(goal.plan) : '(none)'}`,
    `Last reflection: ${reflection}`,
    ...budgetLines(goal, step, now),
    ...(goal.note ? [`Note from a human: ${goal.note}`] : []),
  ].join('\n');
}

/** Files a human gave with the resume this cycle follows (stored at the paused cycle's step). */
function resumeInputs(index: FileEntry[], step: number): string[] {
  if (step < 2) return [];
  const given = index.filter((e) => e.input && e.status !== 'evicted' && e.step === step - 1).map((e) => e.name);
  return given.length ? [`Files a human gave with the resume (marked input above): ${given.join(', ')}`] : [];
}

/** Finished work to keep, the last cycle's failures (with reasons) and partial results, revisions asked for. */
function keptWork(goal: GoalRecord, index: FileEntry[]): string[] {
  const lines: string[] = [];
  // Named once, in the index: a second list of every done name grew each prompt with the goal (P51).
  if (index.some((e) => e.status === 'done'))
    lines.push('Finished work (marked done above): keep it, do not plan it again.');
  const revise = revisable(goal, index);
  // A revision that did not finish left the done version current: the plan rules refuse it
  // unless the reflection asks again, so it is told apart from work to plan again.
  const done = new Set(index.filter((e) => e.status === 'done' && !revise.includes(e.name)).map((e) => e.name));
  const unfinished = goal.outcomes.filter((o) => o.status !== 'done');
  const failed = unfinished.filter((o) => o.status === 'failed' && !done.has(o.artifact));
  if (failed.length) {
    lines.push('Failed in the last cycle (plan what they were for again, or what they need):');
    for (const o of failed) lines.push(`- ${o.artifact} (${o.role}): ${(o.reason ?? 'failed').slice(0, 300)}`);
  }
  const partial = unfinished.filter((o) => o.status === 'partial' && !done.has(o.artifact));
  const named = (list: CycleOutcome[]) => list.map((o) => `${o.artifact} (${o.role})`).join(', ');
  if (partial.length) lines.push(`Partial (stopped at their token cap, unfinished): ${named(partial)}`);
  const stopped = unfinished.filter((o) => done.has(o.artifact));
  if (stopped.length)
    lines.push(
      `Revisions that did not finish (the done version stays; not planned again unless a reflection asks to ` +
        `revise it): ${named(stopped)}`,
    );
  if (revise.length) lines.push(`To revise (the reflection asked; each becomes a new version): ${revise.join(', ')}`);
  const kept = (goal.reflection?.revise ?? []).filter((n) => !revise.includes(n));
  if (kept.length) lines.push(`Not revised (files the goal started with stay as given): ${kept.join(', ')}`);
  return lines;
}

/**
 * What the last reflection asked to revise, but the goal's input files: the user's, kept as given
 * (a revision would also drop their `input` mark, and eviction would then take them).
 */
export function revisable(goal: Pick<GoalRecord, 'reflection'>, index: FileEntry[]): string[] {
  const inputs = new Set(index.filter((e) => e.input).map((e) => e.name));
  return (goal.reflection?.revise ?? []).filter((n) => !inputs.has(n));
}

/** What is left of each budget, and what each role has cost per subtask so far. */
function budgetLines(goal: GoalRecord, step: number, now: number): string[] {
  const { maxSteps } = goal.budgets;
  const { tokens, seconds } = budgetLeft(goal, now);
  const cycles = maxSteps === undefined ? undefined : `cycles: this is cycle ${step} of at most ${maxSteps}`;
  const left = [tokens, cycles, seconds].filter((part) => part !== undefined);
  const lines = left.length ? [`Budget left: ${left.join('; ')}`] : [];
  const costs = Object.entries(costPerSubtask(goal)).map(([role, tokens]) => {
    const n = goal.subtasksByRole[role] ?? 0;
    return `${role} ~${tokens} tokens (${n} subtask${n === 1 ? '' : 's'})`;
  });
  if (costs.length) lines.push(`Cost per subtask so far: ${costs.join(', ')}`);
  return lines;
}
