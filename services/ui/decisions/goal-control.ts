// The decisions every goal has: resume a goal that awaits a human (with an optional note for
// the planner and files for the goal; after a budget pause, with the budget raised), end one a human judges finished,
// and cancel a goal that has not ended. They call the CLI's own functions (GoalClient.resume /
// endAsDone / cancel), so the UI and `deepq resume [--end]|cancel` behave the same.
import { cycleCounts } from '../../../cli/budget-status.ts';
import { ValidationError } from '../../../shared/errors.ts';
import { isTerminal } from '../../../shared/goal/status.ts';
import type { GoalRecord } from '../../../shared/goal/store.ts';
import { raiseFromForm } from '../budget-input.ts';
import type { UiContext } from '../context.ts';
import { formBody } from '../form-body.ts';
import { uploadedFiles } from '../upload.ts';
import { path } from '../views/html.ts';
import { act, formText } from './act.ts';
import { budgetPause } from './budget-pause.ts';
import type { DecisionAction, DecisionProvider, DecisionView } from './types.ts';

const NOTE_MAX_CHARS = 2000;

function cancelAction(goalId: string): DecisionAction {
  return { label: 'Cancel goal', path: path`/goals/${goalId}/cancel`, tone: 'danger' };
}

/** A review, an escalation, or a stall (an escalation the reflector made without its model). */
function awaitingHuman(goal: GoalRecord): DecisionView {
  const decision = goal.reflection?.decision ?? 'continue';
  const review = goal.pausedFor === 'review';
  const stalled = !review && !!goal.reason?.startsWith('stalled:');
  const title = review
    ? `Review: the reflector chose "${decision}"`
    : stalled
      ? 'Stalled: no progress, the reflector stopped asking the model; a human must decide'
      : 'Escalated: a human must decide';
  const detail = stalled && goal.progress.length ? `${goal.reason} (${cycleCounts(goal)})` : goal.reason;
  return {
    id: 'human-pause',
    kind: review ? 'review' : 'escalation',
    title,
    detail: detail ?? undefined,
    actions: [
      {
        label: review ? `Resume (${decision}; with a note or files: re-plan)` : 'Resume (re-plan)',
        path: path`/goals/${goal.goalId}/resume?pause=${goal.pauses}`,
        fields: [
          { name: 'note', label: 'Note for the planner (optional)', kind: 'text', maxChars: NOTE_MAX_CHARS },
          { name: 'files', label: 'Files for the goal (optional, text)', kind: 'files' },
        ],
        tone: 'primary',
      },
      // A human may judge the work finished whatever the reflector chose (deepq resume --end).
      { label: 'End as done', path: path`/goals/${goal.goalId}/end?pause=${goal.pauses}`, tone: 'primary' },
      cancelAction(goal.goalId),
    ],
  };
}

export const goalControl: DecisionProvider = {
  pending(_ctx, goal) {
    if (goal.status === 'awaiting_human' && goal.pausedFor === 'budget')
      return [budgetPause(goal, cancelAction(goal.goalId))];
    if (goal.status === 'awaiting_human') return [awaitingHuman(goal)];
    if (isTerminal(goal.status)) return [];
    return [
      { id: 'control', kind: 'control', title: `The goal is ${goal.status}`, actions: [cancelAction(goal.goalId)] },
    ];
  },

  routes(app, ctx) {
    // One route for every resume, as `deepq resume` is one command: a note, raised budgets, both.
    app.post('/goals/:id/resume', (c) =>
      act(c, ctx, 'resume', async (goalId) => {
        const note = await formText(c, 'note', NOTE_MAX_CHARS);
        const body = await formBody(c, { all: true });
        const files = await uploadedFiles(body.files, ctx.client.cfg.vfs.maxArtifactBytes);
        return ctx.client.resume(goalId, {
          note,
          raise: raiseFromForm(body),
          files,
          pause: pauseOf(c.req.query('pause')),
        });
      }),
    );
    app.post('/goals/:id/end', (c) =>
      act(c, ctx, 'end', (goalId) => ctx.client.endAsDone(goalId, pauseOf(c.req.query('pause')))),
    );
    app.post('/goals/:id/cancel', (c) => act(c, ctx, 'cancel', (goalId) => cancel(ctx, goalId)));
  },
};

/**
 * The pause a page's action answers (its `?pause=`): the page may be older than the goal's
 * state, and an answer must not land on a pause its sender never saw. Absent: the current one.
 */
function pauseOf(raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  if (!/^\d{1,9}$/.test(raw))
    throw new ValidationError(`pause must be a whole number, not ${JSON.stringify(raw.slice(0, 20))}`);
  return Number(raw);
}

/** Cancels the goal; one that ended meanwhile (the page was older) is refused, saying how it ended. */
async function cancel(ctx: UiContext, goalId: string): Promise<void> {
  const { cancelled, status } = await ctx.client.cancel(goalId);
  if (!cancelled) throw new ValidationError(`the goal is already ${status}: nothing to cancel`);
}
