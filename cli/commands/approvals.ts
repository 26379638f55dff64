// Human approval of risky tool calls: approve, reject, and the list of calls waiting. Work
// from any machine with the Redis URL. Tool names and inputs come from models: every line goes
// through print (control characters escaped), JSON through printJson.
import type { Command } from 'commander';
import { ValidationError } from '../../shared/errors.ts';
import type { ApprovalRecord } from '../../shared/goal/approvals.ts';
import type { GoalRecord } from '../../shared/goal/store.ts';
import { showHiddenCharacters } from '../../shared/runtime/bidi.ts';
import { BUDGET_FLAG, pausedBudgetKind } from '../budget-flags.ts';
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
      print(`approved ${callId} (${r.record.tool}) of goal ${goalId}; ${afterDecision(r)}`);
    });
  program
    .command('reject')
    .description('refuse a tool call that waits for a human; the model is told why')
    .argument('<goalId>')
    .argument('<callId>', 'the ap-… id shown by status, watch and approvals')
    .option('--reason <text>', 'why: the model reads it')
    .action(async (goalId: string, callId: string, o) => {
      // As `resume --note ""`: an empty reason tells the model nothing, where --reason promises why.
      if (o.reason !== undefined && !o.reason.trim())
        throw new ValidationError('--reason is empty: say why for the model, or leave --reason out');
      const r = await (await client()).decide(goalId, callId, 'rejected', o.reason);
      print(`rejected ${callId} (${r.record.tool}) of goal ${goalId}; ${afterDecision(r)}`);
    });
  program
    .command('approvals')
    .description('list tool calls waiting for a human (of one goal, or of all)')
    .argument('[goalId]')
    .option('--json', 'print JSON')
    .option('--full', "each call's whole input (what approving it runs), not its 300-character preview")
    .action(async (goalId: string | undefined, o) => {
      const c = await client();
      const rows = await c.pendingApprovals(goalId);
      const full = o.full ? await c.approvals.fullInputs(rows, (i) => rows[i]!.goalId) : [];
      if (o.json) {
        printJson(o.full ? rows.map((r, i) => ({ ...r, inputFull: full[i] ?? r.input })) : rows);
        return;
      }
      if (!rows.length) print('(no tool calls waiting for approval)');
      rows.forEach((r, i) => {
        for (const line of approvalLines(r, !goalId, o.full ? (full[i] ?? r.input) : undefined)) print(line);
      });
    });
}

function afterDecision(r: { pendingLeft: number; pausedAtBudget?: GoalRecord }): string {
  if (r.pendingLeft) return `${r.pendingLeft} more call(s) of that subtask still wait`;
  const g = r.pausedAtBudget;
  if (!g) return 'the subtask goes on in the next free worker';
  const flag = BUDGET_FLAG[pausedBudgetKind(g)];
  const resume = `deepq resume ${g.goalId} ${flag} N`;
  return `the goal is paused at its budget: the subtask goes on once it is resumed (${resume})`;
}

/** What a human approves, as it will run: controls and invisible characters escaped. */
const shown = (text: string) => safeLine(showHiddenCharacters(text));

/**
 * A pending call as `status` and `approvals` show it: its id, tool and where it comes from,
 * then its input (model text, escaped) and when it times out.
 */
export function approvalLines(r: ApprovalRecord & { goalId?: string }, withGoal = false, full?: string): string[] {
  const goal = withGoal && r.goalId ? `goal ${r.goalId} ` : '';
  const where = `${goal}cycle ${r.step} [${r.index}] ${safeLine(r.role)}`;
  // A cut preview says so, and how to see the rest: approving runs the whole input.
  const cut = r.input.endsWith('…') ? `  (cut: deepq approvals ${r.goalId ?? '<goalId>'} --full shows it whole)` : '';
  const input =
    full === undefined
      ? [`    input   ${shown(r.input)}${cut}`]
      : ['    input', ...full.split('\n').map((l) => `      ${shown(l)}`)];
  return [`${r.callId}  ${shown(r.tool)}  (${where})`, ...input, `    expires ${new Date(r.expiresAt).toISOString()}`];
}
