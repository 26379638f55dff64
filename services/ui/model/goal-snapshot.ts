// A goal's current state as the Goal page shows it (header, budgets, artifacts, tokens by role,
// pending decisions, stored transcripts), display-ready: the page renders it and every live update carries it
// again as JSON, which the client script renders with text nodes only.
import { pausedBudgetKind } from '../../../cli/budget-flags.ts';
import { storedThreads } from '../../../shared/agent/transcripts.ts';
import type { BudgetKind } from '../../../shared/errors.ts';
import { estimateCost, formatCost } from '../../../shared/goal/cost.ts';
import { isPausedForBudget } from '../../../shared/goal/parking.ts';
import { isTerminal } from '../../../shared/goal/status.ts';
import { type GoalRecord, totalTokens } from '../../../shared/goal/store.ts';
import type { FileEntry } from '../../../shared/vfs/vfs.ts';
import type { UiContext } from '../context.ts';
import { pendingDecisions } from '../decisions/index.ts';
import type { DecisionView } from '../decisions/types.ts';
import { bytes, count } from '../views/format.ts';
import { path } from '../views/html.ts';

export interface BudgetLine {
  name: string;
  used: string;
  limit: string;
  /** Spent share of the limit (0-1), null without a limit. */
  share: number | null;
  /** The goal is paused at this budget. */
  paused: boolean;
}

export interface ArtifactLine {
  name: string;
  status: string;
  version: number;
  role: string;
  step: number;
  bytes: string;
  stored: 'inline' | 'spilled' | 'gone';
  /** Its page; null for an evicted or deleted name. */
  href: string | null;
}

export interface UsageLine {
  role: string;
  model: string;
  input: string;
  output: string;
  cacheRead: string;
  cacheWrite: string;
  /** The endpoint reported no usage at least once: these counts are partly deepq's estimate. */
  estimated: boolean;
}

export interface GoalSnapshot {
  goalId: string;
  status: string;
  terminal: boolean;
  step: number;
  reason: string;
  tokens: string;
  cost: string;
  budgets: BudgetLine[];
  artifacts: ArtifactLine[];
  usage: UsageLine[];
  decisions: DecisionView[];
  /** Stored transcripts (thread ids), newest first. */
  threads: string[];
}

/** Each budget's row name. */
const BUDGET_ROW: Record<BudgetKind, string> = { tokens: 'tokens', steps: 'cycles', seconds: 'seconds' };

function budgetLines(goal: GoalRecord, now: number): BudgetLine[] {
  const b = goal.budgets;
  const seconds = ((goal.finishedAt ?? now) - goal.createdAt) / 1000;
  const pausedAt = isPausedForBudget(goal) ? BUDGET_ROW[pausedBudgetKind(goal)] : null;
  const line = (name: string, used: number, limit: number | undefined, show: (n: number) => string) => ({
    name,
    used: show(used),
    limit: limit === undefined ? 'no limit' : show(limit),
    share: limit === undefined ? null : Math.min(1, used / limit),
    paused: name === pausedAt,
  });
  return [
    line('tokens', totalTokens(goal.tokens), b.maxTokens, count),
    line('cycles', goal.step, b.maxSteps, count),
    line('seconds', seconds, b.maxSeconds, (n) => n.toFixed(1)),
  ];
}

function artifactLine(goalId: string, f: FileEntry): ArtifactLine {
  const gone = f.status === 'evicted';
  return {
    name: f.name,
    status: f.reason === 'deleted' ? 'deleted' : f.status,
    version: f.version,
    role: f.input ? 'input' : (f.role ?? ''),
    step: f.step,
    bytes: bytes(f.bytes),
    stored: gone ? 'gone' : f.blobRef ? 'spilled' : 'inline',
    href: gone ? null : `${path`/goals/${goalId}/artifact`}?name=${encodeURIComponent(f.name)}`,
  };
}

function usageLines(goal: GoalRecord): UsageLine[] {
  return Object.entries(goal.usage)
    .map(([key, u]) => {
      const [role = '', model = ''] = key.split('|');
      const [input, output, cacheRead, cacheWrite] = [u.input, u.output, u.cache_read, u.cache_write].map(count);
      const estimated = goal.estimatedUsage.includes(key);
      return { role, model, input: input!, output: output!, cacheRead: cacheRead!, cacheWrite: cacheWrite!, estimated };
    })
    .sort((a, b) => a.role.localeCompare(b.role) || a.model.localeCompare(b.model));
}

export async function goalSnapshot(ctx: UiContext, goal: GoalRecord, now = Date.now()): Promise<GoalSnapshot> {
  const [files, decisions, threads] = await Promise.all([
    ctx.client.vfs.index(goal.goalId),
    pendingDecisions(ctx, goal),
    storedThreads(ctx.client, goal.goalId, ctx.cfg.transcriptTtlSeconds, now),
  ]);
  return {
    goalId: goal.goalId,
    status: goal.status,
    terminal: isTerminal(goal.status),
    step: goal.step,
    reason: goal.reason ?? '',
    tokens: count(totalTokens(goal.tokens)),
    cost: formatCost(estimateCost(goal, ctx.cfg.prices), { models: true }),
    budgets: budgetLines(goal, now),
    artifacts: files.map((f) => artifactLine(goal.goalId, f)),
    usage: usageLines(goal),
    decisions,
    threads: threads.map((t) => t.threadId),
  };
}
