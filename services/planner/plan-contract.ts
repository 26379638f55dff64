// The planner's output contract: a plan (shared/goal/plan.ts) plus the rules that need
// context: known roles, unique artifact names, read_files naming files that exist, no `done`
// artifact planned again unless the last reflection asked to revise it (finished work is
// kept), and an estimated cost within the tokens the goal has left.
import type { z } from 'zod';
import type { OutputContract } from '../../shared/agent/output-contracts.ts';
import { jsonContract } from '../../shared/agent/output-contracts.ts';
import { type Plan, PlanSchema } from '../../shared/goal/plan.ts';
import { minTokenCapOf } from './token-caps.ts';

export interface PlanContext {
  /** Done artifacts: finished work, not to be planned again. */
  done?: string[];
  /** Done artifacts the last reflection asked to revise: these may be planned again. */
  revise?: string[];
  /** The files the goal started with: the user's, never a subtask's artifact (nor revised). */
  inputs?: string[];
  /** The tokens the goal has left, and what each role has cost per subtask so far. */
  budget?: PlanBudget;
  /** Per role, the tokens one call needs before its instruction (planner/token-caps.ts). */
  minCaps?: Record<string, number>;
}

export interface PlanBudget {
  tokensLeft: number;
  /** Average tokens per subtask of each role that has run in this goal. */
  perSubtask: Record<string, number>;
}

interface RuleIssue {
  path: (string | number)[];
  message: string;
}

/** The rules a plan breaks given its context (roles, files, done work); empty when it keeps them all. */
export function planRuleIssues(
  plan: Pick<Plan, 'subtasks'>,
  knownRoles: string[],
  existingFiles: string[],
  context: PlanContext = {},
): RuleIssue[] {
  const files = new Set(existingFiles);
  const done = new Set(context.done ?? []);
  const revise = new Set(context.revise ?? []);
  const inputs = new Set(context.inputs ?? []);
  const issues: RuleIssue[] = [];
  const seen = new Set<string>();
  plan.subtasks.forEach((t, i) => {
    const issue = (path: (string | number)[], message: string) =>
      issues.push({ path: ['subtasks', i, ...path], message });
    // Too long a name has its own issue: it is not quoted (the reason is logged, stored, sent back).
    if (!knownRoles.includes(t.role) && t.role.length <= 64)
      issue(['role'], `unknown role ${JSON.stringify(t.role)} (known: ${knownRoles.join(', ')})`);
    const min = context.minCaps ? minTokenCapOf(context.minCaps, t.role, t.instruction) : undefined;
    if (t.token_cap !== undefined && min !== undefined && t.token_cap < min)
      issue(
        ['token_cap'],
        `token_cap ${t.token_cap} is below the ~${min} tokens one call of ${t.role} needs ` +
          '(its prompt, tools and instruction as input, and an answer): give it more, or none',
      );
    const name = JSON.stringify(t.expected_artifact);
    if (seen.has(t.expected_artifact)) issue(['expected_artifact'], `duplicate artifact name ${name}`);
    const clash = folderClash(t.expected_artifact, [...seen, ...files]);
    if (clash) issue(['expected_artifact'], clash);
    seen.add(t.expected_artifact);
    if (inputs.has(t.expected_artifact))
      issue(
        ['expected_artifact'],
        `${name} is one of the files the goal started with: they stay as given (read it, write another artifact)`,
      );
    else if (done.has(t.expected_artifact) && !revise.has(t.expected_artifact))
      issue(
        ['expected_artifact'],
        `${name} is done: finished work is kept, so plan only what is missing or failed ` +
          '(a done artifact is planned again only when the reflection asks to revise it)',
      );
    t.read_files.forEach((f, j) => {
      if (!files.has(f)) issue(['read_files', j], `read_files names ${JSON.stringify(f)}, which does not exist`);
    });
  });
  return issues;
}

/**
 * A name that is another's folder (`report` beside `report/summary.md`): no export can write
 * both (a file cannot be a folder), so `deepq artifacts --out` would refuse the whole goal.
 */
function folderClash(name: string, others: Iterable<string>): string | null {
  for (const other of others) {
    const [folder, file] = other.startsWith(`${name}/`)
      ? [name, other]
      : name.startsWith(`${other}/`)
        ? [other, name]
        : [];
    if (folder !== undefined)
      return `${JSON.stringify(folder)} cannot be both a file and the folder of ${JSON.stringify(file)}: rename one`;
  }
  return null;
}

/** The plan schema with the context's rules, for callers that want one zod schema. */
export function planSchemaFor(knownRoles: string[], existingFiles: string[], context: PlanContext = {}) {
  return PlanSchema.superRefine((plan, ctx) => {
    for (const i of planRuleIssues(plan, knownRoles, existingFiles, context))
      ctx.addIssue({ code: 'custom', path: i.path, message: i.message });
  });
}

/**
 * What a plan will cost, as far as is known: each subtask's token_cap, else its role's cost per
 * subtask so far; a role that has not run yet in this goal, without a cap, is not counted.
 */
export function estimatePlan(plan: Pick<Plan, 'subtasks'>, perSubtask: Record<string, number>) {
  let tokens = 0;
  const parts: string[] = [];
  for (const t of plan.subtasks) {
    const cost = t.token_cap ?? perSubtask[t.role];
    if (cost === undefined) continue;
    tokens += cost;
    parts.push(`${t.expected_artifact} ~${cost}${t.token_cap ? ' (its cap)' : ` (${t.role}'s average)`}`);
  }
  return { tokens, detail: parts.join(', ') };
}

export function overBudgetProblem(plan: Pick<Plan, 'subtasks'>, budget: PlanBudget | undefined): string | null {
  if (!budget) return null;
  const est = estimatePlan(plan, budget.perSubtask);
  if (est.tokens <= budget.tokensLeft) return null;
  return (
    `the plan's estimated cost, ${est.tokens} tokens (${est.detail}), is more than the ${budget.tokensLeft} ` +
    "tokens left of the goal's budget: plan fewer subtasks, or give each a token_cap so that they fit"
  );
}

/** The contract, and whether its last rejection was the budget alone (the goal is out of budget, not confused). */
export interface PlanContract extends OutputContract<Plan> {
  lastOverBudget(): string | null;
}

/**
 * The static plan schema (compiled once per process), then the context's rules as plain code:
 * a schema refined per job was rebuilt and re-compiled by zod on every plan job.
 */
const planShape = jsonContract(
  'plan',
  'JSON {"subtasks": [{"role", "instruction", "expected_artifact", "read_files", "token_cap"?}]} with 1-5 ' +
    'subtasks, known roles, unique artifact names, read_files naming existing files, no done artifact ' +
    "planned again unless the reflection asks to revise it, and an estimated cost within the goal's budget",
  PlanSchema as z.ZodType<Plan>,
);

export function planContract(roles: string[], files: string[], context: PlanContext = {}): PlanContract {
  let overBudget: string | null = null;
  return {
    ...planShape,
    check(text) {
      overBudget = null;
      const verdict = planShape.check(text);
      if (!verdict.ok) return verdict;
      const issues = planRuleIssues(verdict.value, roles, files, context);
      if (issues.length) {
        const problem = issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
        return { ok: false, problem: `plan does not match its schema: ${problem}` };
      }
      overBudget = overBudgetProblem(verdict.value, context.budget);
      return overBudget ? { ok: false, problem: overBudget } : verdict;
    },
    lastOverBudget: () => overBudget,
  };
}
