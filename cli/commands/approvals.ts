// Human approval of risky tool calls: approve, reject, and the list of calls waiting. Work
// from any machine with the Redis URL. Tool names and inputs come from models: every line goes
// through print (control characters escaped), JSON through printJson.
import type { Command } from 'commander';
import type { ApprovalRecord } from '../../shared/goal/approvals.ts';
import { client } from '../connect.ts';
import { safeLine } from '../terminal.ts';
import { print, printJson } from './output.ts';

export function registerApprovalCommands(program: Command): void {
  program
    .command('approve')
    .description('let a tool call that waits for a human run; its subtask then goes on')
    .argument('<goalId>')
    .argument('<callId>', 'the ap-… id shown by status, watch and approvals')
    .action(async (goalId: string, callId: string) => {
      const r = await (await client()).decide(goalId, callId, 'approved');
      print(`approved ${callId} (${r.record.tool}) of goal ${goalId}; ${afterDecision(r.pendingLeft)}`);
    });
  program
    .command('reject')
    .description('refuse a tool call that waits for a human; the model is told why')
    .argument('<goalId>')
    .argument('<callId>', 'the ap-… id shown by status, watch and approvals')
    .option('--reason <text>', 'why: the model reads it')
    .action(async (goalId: string, callId: string, o) => {
      const r = await (await client()).decide(goalId, callId, 'rejected', o.reason);
      print(`rejected ${callId} (${r.record.tool}) of goal ${goalId}; ${afterDecision(r.pendingLeft)}`);
    });
  program
    .command('approvals')
    .description('list tool calls waiting for a human (of one goal, or of all)')
    .argument('[goalId]')
    .option('--json', 'print JSON')
    .action(async (goalId: string | undefined, o) => {
      const rows = await (await client()).pendingApprovals(goalId);
      if (o.json) {
        printJson(rows);
        return;
      }
      if (!rows.length) print('(no tool calls waiting for approval)');
      for (const r of rows) for (const line of approvalLines(r, !goalId)) print(line);
    });
}

function afterDecision(pendingLeft: number): string {
  return pendingLeft
    ? `${pendingLeft} more call(s) of that subtask still wait`
    : 'the subtask goes on in the next free worker';
}

/**
 * A pending call as `status` and `approvals` show it: its id, tool and where it comes from,
 * then its input (model text, escaped) and when it times out.
 */
export function approvalLines(r: ApprovalRecord & { goalId?: string }, withGoal = false): string[] {
  const goal = withGoal && r.goalId ? `goal ${r.goalId} ` : '';
  const where = `${goal}cycle ${r.step} [${r.index}] ${safeLine(r.role)}`;
  return [
    `${r.callId}  ${safeLine(r.tool)}  (${where})`,
    `    input   ${safeLine(r.input)}`,
    `    expires ${new Date(r.expiresAt).toISOString()}`,
  ];
}
