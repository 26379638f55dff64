// What the planner is told: its system prompt (the roles it may assign) and, per cycle, the
// goal, the file index (never contents), the prior plan, the last reflection and any note.
import { type AgentSpec, coordinatorSpec } from '../../shared/agent/roles.ts';
import type { GoalRecord } from '../../shared/goal/store.ts';
import { type Config, roleNames } from '../../shared/runtime/config.ts';
import { type FileEntry, formatIndex } from '../../shared/vfs/vfs.ts';

export function plannerPrompt(roles: string[]): string {
  return (
    "You are the planner. Decompose the user's goal into 1-5 subtasks assigned to the " +
    `available roles: ${roles.join(', ')}.\n` +
    'Return ONLY JSON: {"subtasks": [{"role": str, "instruction": str, "expected_artifact": str, ' +
    '"read_files": [str]}]}. Artifact names are unique within the plan; read_files may only ' +
    'name files that exist in the index. Do not execute subtasks. Do not write file contents.'
  );
}

export function plannerSpec(cfg: Config): AgentSpec {
  return coordinatorSpec({ systemPrompt: plannerPrompt(roleNames(cfg)), tier: 'HIGH', contract: 'plan' }, cfg.planner);
}

export function plannerMessage(goal: GoalRecord, step: number, index: FileEntry[]): string {
  const reflection = goal.reflection
    ? JSON.stringify({ decision: goal.reflection.decision, reason: goal.reflection.reason })
    : '(none)';
  return [
    `Goal: ${goal.goal}`,
    `Cycle: ${step}`,
    `Current files:\n${formatIndex(index)}`,
    `Prior plan: ${goal.plan ? JSON.stringify(goal.plan) : '(none)'}`,
    `Last reflection: ${reflection}`,
    ...(goal.note ? [`Note from a human: ${goal.note}`] : []),
  ].join('\n');
}
