// The decisions every goal has: resume a goal that awaits a human (with an optional note for
// the planner) and cancel a goal that has not ended. Both call the CLI's own functions
// (GoalClient.resume / cancel), so the UI and `deepq resume|cancel` behave the same.
import { isTerminal } from '../../../shared/goal/status.ts';
import type { GoalRecord } from '../../../shared/goal/store.ts';
import { path } from '../views/html.ts';
import { act, formText } from './act.ts';
import type { DecisionAction, DecisionProvider, DecisionView } from './types.ts';

const NOTE_MAX_CHARS = 2000;

function cancelAction(goalId: string): DecisionAction {
  return { label: 'Cancel goal', path: path`/goals/${goalId}/cancel`, tone: 'danger' };
}

function awaitingHuman(goal: GoalRecord): DecisionView {
  const decision = goal.reflection?.decision ?? 'continue';
  const review = goal.pausedFor === 'review';
  return {
    id: 'human-pause',
    kind: review ? 'review' : 'escalation',
    title: review ? `Review: the reflector chose "${decision}"` : 'Escalated: a human must decide',
    detail: goal.reason ?? undefined,
    actions: [
      {
        label: review ? `Resume (${decision}; with a note: re-plan)` : 'Resume (re-plan)',
        path: path`/goals/${goal.goalId}/resume`,
        note: { name: 'note', label: 'Note for the planner (optional)' },
        tone: 'primary',
      },
      cancelAction(goal.goalId),
    ],
  };
}

export const goalControl: DecisionProvider = {
  pending(_ctx, goal) {
    if (goal.status === 'awaiting_human') return [awaitingHuman(goal)];
    if (isTerminal(goal.status)) return [];
    return [
      { id: 'control', kind: 'control', title: `The goal is ${goal.status}`, actions: [cancelAction(goal.goalId)] },
    ];
  },

  routes(app, ctx) {
    app.post('/goals/:id/resume', (c) =>
      act(c, ctx, 'resume', async (goalId) => ctx.client.resume(goalId, await formText(c, 'note', NOTE_MAX_CHARS))),
    );
    app.post('/goals/:id/cancel', (c) => act(c, ctx, 'cancel', (goalId) => ctx.client.cancel(goalId)));
  },
};
