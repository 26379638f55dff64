// Human approval of risky tool calls, as the agent loop sees it. A role lists tools whose
// calls wait for a human (`approval: [write_file, "mcp:github/*"]`). When a model turn calls
// one, no tool of that turn runs: the loop throws an ApprovalPause carrying a checkpoint (the
// messages so far, that turn's tool uses, which ones await a decision). The job stores it and
// stops; later, with the decisions, the loop resumes from the checkpoint without asking the
// model again. Persistence and the job's wait live in shared/goal/approvals.ts and the worker.
import type { Message, ToolResultBlock, ToolUseBlock } from './providers/types.ts';

/** How a call awaiting approval was decided. */
export const APPROVAL_DECISIONS = ['approved', 'rejected', 'timeout', 'cancelled'] as const;
export type ApprovalDecisionStatus = (typeof APPROVAL_DECISIONS)[number];

export interface ApprovalDecision {
  status: ApprovalDecisionStatus;
  /** What the human (or deepq, for a timeout or a cancel) said; the model reads it on a refusal. */
  reason?: string;
}

/** One call of the paused turn that awaits a decision. */
export interface AwaitingCall {
  /** Its position among the turn's tool uses. */
  index: number;
  /** The tool's configured name (`Tool.approvalName ?? label ?? def.name`). */
  tool: string;
}

/** Everything needed to go on from a paused turn without repeating its model call. */
export interface AgentCheckpoint {
  /** The conversation so far, the assistant turn with the tool uses included. */
  messages: Message[];
  /** Model calls made in all, and in the current phase (the first answer, or the contract retry). */
  turns: number;
  phaseTurns: number;
  /** The pause came during the one retry after a rejected answer. */
  contractRetry: boolean;
  /** The paused turn's tool uses, in order (none for a run paused at its goal's budget). */
  uses: ToolUseBlock[];
  awaiting: AwaitingCall[];
  /** Results of the turn's first calls, already run (a checkpoint stored after each tool call). */
  results?: ToolResultBlock[];
  /**
   * The turn's call that had started when this was stored (an at-most-once tool's, stored
   * before it went out): a start from this checkpoint does not run it again.
   */
  started?: number;
  /** Tokens the run had used, and whether it was told its token cap is near (create-agent.ts). */
  tokensUsed?: number;
  capWarned?: boolean;
}

export interface ApprovalGate {
  /** Does a call of the tool with this configured name need a human's approval? */
  needs(tool: string): boolean;
  /** Decisions known so far for the checkpoint's awaiting calls, by their index in its turn. */
  decisions?: ReadonlyMap<number, ApprovalDecision>;
}

/** Thrown by the agent loop when a turn's calls need decisions it does not have. */
export class ApprovalPause extends Error {
  override name = 'ApprovalPause';
  constructor(readonly checkpoint: AgentCheckpoint) {
    super(`awaiting approval of ${checkpoint.awaiting.map((a) => a.tool).join(', ')}`);
  }
}

/**
 * Does an approval entry cover a tool's configured name? Equal names, or `mcp:<server>/*`
 * against any `mcp:<server>/<tool>`.
 */
export function approvalCovers(entry: string, tool: string): boolean {
  if (entry === tool) return true;
  return entry.startsWith('mcp:') && entry.endsWith('/*') && tool.startsWith(entry.slice(0, -1));
}

/**
 * Could an approval entry ever match one of the role's tools entries (each a built-in name,
 * `mcp:<server>/<tool>` or `mcp:<server>/*`)? The config check uses it: an entry that
 * matches nothing is a typo that would leave a risky tool ungated.
 */
export function approvalMatchesRoleTool(entry: string, roleTool: string): boolean {
  return approvalCovers(entry, roleTool) || approvalCovers(roleTool, entry);
}

/** The gate for a role's approval list, with the decisions known so far. */
export function approvalGate(entries: readonly string[], decisions?: ReadonlyMap<number, ApprovalDecision>) {
  const gate: ApprovalGate = { needs: (tool) => entries.some((e) => approvalCovers(e, tool)), decisions };
  return gate;
}

/** The is_error text the model gets for a call that was not approved. */
export function refusalText(d: ApprovalDecision): string {
  const why = d.reason ? `: ${d.reason}` : '';
  switch (d.status) {
    case 'rejected':
      return `error: a human rejected this call, it was not run${why}`;
    case 'timeout':
      return `error: no human decided on this call in time, it was not run${why}`;
    default:
      return `error: this call was not run${why}`;
  }
}
