// Tool calls waiting for a human (issue #14's approvals): one decision per pending call, with
// its tool, where it comes from and its input (model-written: shown as text), to approve or
// to reject with a reason the model reads. The buttons call GoalClient.decide, what
// `deepq approve|reject` call.
import type { Context } from 'hono';
import { APPROVAL_REASON_MAX_CHARS, isCallId } from '../../../shared/goal/approvals.ts';
import { showHiddenCharacters } from '../../../shared/runtime/bidi.ts';
import type { UiEnv } from '../context.ts';
import { path } from '../views/html.ts';
import { act, formText } from './act.ts';
import type { DecisionProvider } from './types.ts';

export const toolApprovals: DecisionProvider = {
  async pending(ctx, goal) {
    const calls = await ctx.client.pendingApprovals(goal.goalId);
    // The whole input, not the record's preview: approving runs all of it.
    const inputs = await ctx.client.approvals.fullInputs(calls, () => goal.goalId);
    return calls.map((r, i) => {
      const base = path`/goals/${goal.goalId}/approvals/${r.callId}`;
      const tool = showHiddenCharacters(r.tool);
      return {
        id: `approval-${r.callId}`,
        kind: 'approval',
        title: `Tool call waiting for approval: ${tool} (cycle ${r.step}, subtask ${r.index}, ${r.role})`,
        detail: `${r.callId} · refused by itself at ${new Date(r.expiresAt).toISOString()} · input:`,
        // A human decides on what it reads: nothing hidden, no override reordering it (shared/runtime/bidi.ts).
        content: showHiddenCharacters(inputs[i] ?? r.input),
        actions: [
          { label: 'Approve', path: `${base}/approve`, tone: 'primary' },
          {
            label: 'Reject',
            path: `${base}/reject`,
            fields: [
              {
                name: 'reason',
                label: 'Reason (the model reads it)',
                kind: 'text',
                maxChars: APPROVAL_REASON_MAX_CHARS,
              },
            ],
            tone: 'danger',
          },
        ],
      };
    });
  },

  routes(app, ctx) {
    const decide = (decision: 'approved' | 'rejected') => async (c: Context<UiEnv>) => {
      const callId = c.req.param('callId') ?? '';
      if (!isCallId(callId)) return c.text('unknown approval id\n', 404);
      return act(c, ctx, decision === 'approved' ? 'approve' : 'reject', async (goalId) => {
        const reason = decision === 'rejected' ? await formText(c, 'reason', APPROVAL_REASON_MAX_CHARS) : undefined;
        return ctx.client.decide(goalId, callId, decision, reason);
      });
    };
    app.post('/goals/:id/approvals/:callId/approve', decide('approved'));
    app.post('/goals/:id/approvals/:callId/reject', decide('rejected'));
  },
};
