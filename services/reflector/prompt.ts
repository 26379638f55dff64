// What the reflector is told: its system prompt and, per cycle, the goal, the plan, each
// subtask's outcome and the file index (never contents).
import { type AgentSpec, coordinatorSpec } from '../../shared/agent/roles.ts';
import { budgetLeft } from '../../shared/goal/budgets.ts';
import type { GoalRecord } from '../../shared/goal/store.ts';
import type { Config } from '../../shared/runtime/config.ts';
import { type FileEntry, formatIndex } from '../../shared/vfs/vfs.ts';
import type { SubtaskOutcome } from './outcomes.ts';

export const REFLECTOR_PROMPT =
  'You are the reflection node. Given the goal, the plan, the outcomes and the file index (name, ' +
  'status, bytes), decide what happens next. Return ONLY JSON: {"decision": ' +
  '"continue"|"replan"|"end"|"escalate", "reason": str, "revise": [str] (optional)}. Use "end" when ' +
  'the goal is met, "continue" to run the next cycle of the plan, "replan" when the plan is wrong or ' +
  'work failed (done artifacts are kept; only what failed or is missing is planned again), ' +
  '"escalate" when a human must decide. List in "revise" the done artifacts that must be rewritten ' +
  '(not the files the goal started with: they stay as given).';

const specs = new WeakMap<Config, AgentSpec>();

/** Built once per config (a process has one), not validated again on every job. */
export function reflectorSpec(cfg: Config): AgentSpec {
  let spec = specs.get(cfg);
  if (!spec) {
    spec = coordinatorSpec({ systemPrompt: REFLECTOR_PROMPT, tier: 'LOW', contract: 'reflection' }, cfg.reflector);
    specs.set(cfg, spec);
  }
  return spec;
}

export function reflectorMessage(
  goal: GoalRecord,
  step: number,
  outcomes: SubtaskOutcome[],
  index: FileEntry[],
  now = Date.now(),
): string {
  const { tokens, seconds } = budgetLeft(goal, now);
  const left = [tokens, seconds].filter((part) => part !== undefined);
  const lines = outcomes.map((o) => `- ${o.artifact} (${o.role}): ${o.status}${o.reason ? `: ${o.reason}` : ''}`);
  return [
    `Goal: ${goal.goal}`,
    `Cycle: ${step}`,
    `Plan: ${JSON.stringify(goal.plan)}`,
    `Outcomes:\n${lines.join('\n') || '(none)'}`,
    `Current files:\n${formatIndex(index)}`,
    ...(left.length ? [`Budget left: ${left.join('; ')}`] : []),
    ...stepBudgetLine(goal, step),
  ].join('\n');
}

/**
 * The step budget, when the goal has one: at its last cycle a `continue` or `replan` runs out of
 * it (the goal ends budget_exceeded, or waits for a human), so a met goal must say `end` now.
 */
function stepBudgetLine(goal: GoalRecord, step: number): string[] {
  const max = goal.budgets.maxSteps;
  if (max === undefined) return [];
  const last =
    step >= max
      ? ': the last one. "continue" or "replan" would run out of the step budget; say "end" if the goal is met'
      : '';
  return [`Step budget: cycle ${step} of at most ${max}${last}`];
}
