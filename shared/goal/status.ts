// The statuses a goal can be in. Moves between them live in lifecycle.ts.
export const TERMINAL_STATUSES = ['done', 'failed', 'cancelled', 'budget_exceeded'] as const;
export const GOAL_STATUSES = [
  'queued',
  'planning',
  'running',
  'reflecting',
  'awaiting_human',
  ...TERMINAL_STATUSES,
] as const;
export type GoalStatus = (typeof GOAL_STATUSES)[number];
export type TerminalStatus = (typeof TERMINAL_STATUSES)[number];

export function isTerminal(status: string): status is TerminalStatus {
  return (TERMINAL_STATUSES as readonly string[]).includes(status);
}

/**
 * The cycle a goal is at: `step` counts planned cycles, so a goal queued for, or planning,
 * its next cycle is at step + 1 (what its plan job, and a pause there, are numbered).
 */
export function currentCycle(goal: { status: string; step: number }): number {
  return goal.status === 'queued' || goal.status === 'planning' ? goal.step + 1 : goal.step;
}
