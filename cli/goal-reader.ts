// A goal's read side for the CLI: its record, summary, artifacts and pending approvals, from
// Redis alone. GoalClient (goal-client.ts) adds what changes goals and needs BullMQ; `deepq
// status` reads through this class alone, so it loads no BullMQ.
import type { Redis } from 'ioredis';
import { UnknownGoalError } from '../shared/errors.ts';
import { type ApprovalRecord, type ApprovalStore, isAwaitingDecision } from '../shared/goal/approvals.ts';
import { GoalIdSchema } from '../shared/goal/ids.ts';
import { isTerminal } from '../shared/goal/status.ts';
import type { GoalRecord, GoalStore } from '../shared/goal/store.ts';
import type { Config } from '../shared/runtime/config.ts';
import { openStores, type Stores } from '../shared/runtime/stores.ts';
import type { FileEntry, VirtualFs } from '../shared/vfs/vfs.ts';
import { type UsageSummary, usageSummary } from './cost-status.ts';

/** The `--json` / `status --json` object. */
export interface GoalSummary {
  goalId: string;
  status: string;
  steps: number;
  artifacts: string[];
  createdAt: number;
  finishedAt: number | null;
  /** Why the goal ended (the reflector's reason, a failure, a budget) or waits for a human; else null. */
  reason: string | null;
  /** What an `awaiting_human` goal waits for (`review`, `escalation`, `budget`); else null. */
  pausedFor: GoalRecord['pausedFor'];
  /** Tokens and estimated cost per model, and the total (costUsd null when a model has no price). */
  usage: UsageSummary;
  /** Tool calls waiting for a human, oldest first: the goal runs on once they are decided. */
  approvals: PendingApproval[];
}

/** A call waiting for a human, as `status --json` lists it. */
export type PendingApproval = Pick<
  ApprovalRecord,
  'callId' | 'tool' | 'role' | 'step' | 'index' | 'requestedAt' | 'expiresAt'
>;

export class GoalReader {
  readonly redis: Redis;
  readonly goals: GoalStore;
  readonly approvals: ApprovalStore;
  readonly vfs: VirtualFs;
  /** Reads through `stores` when given (a GoalClient's), else through stores of its own on `redis`. */
  constructor(
    readonly cfg: Config,
    redis: Redis,
    stores: Stores = openStores(cfg, redis),
  ) {
    ({ redis: this.redis, goals: this.goals, approvals: this.approvals, vfs: this.vfs } = stores);
  }

  async get(goalId: string): Promise<GoalRecord> {
    if (!GoalIdSchema.safeParse(goalId).success) throw new UnknownGoalError(goalId);
    return this.goals.mustGet(goalId);
  }

  async summary(goalId: string): Promise<GoalSummary> {
    const g = await this.get(goalId);
    const files = await this.vfs.index(goalId);
    return {
      goalId,
      status: g.status,
      steps: g.step,
      artifacts: files.filter((f) => f.status !== 'evicted').map((f) => f.name),
      createdAt: g.createdAt,
      finishedAt: g.finishedAt,
      reason: g.reason,
      pausedFor: g.status === 'awaiting_human' ? g.pausedFor : null,
      usage: usageSummary(g, this.cfg.prices),
      approvals: (await this.pendingApprovals(goalId)).map(pendingApproval),
    };
  }

  async artifacts(goalId: string): Promise<FileEntry[]> {
    await this.get(goalId);
    return (await this.vfs.index(goalId)).filter((f) => f.status !== 'evicted');
  }

  async read(goalId: string, name: string): Promise<string | null> {
    return this.vfs.read(goalId, name);
  }

  /**
   * Calls waiting for a human: one goal's (oldest first), or every goal's (soonest timeout first).
   * An ended goal's are left out: still pending until they are released, but no decision runs them.
   * Timed out or not is judged on Redis's clock, as a decision is.
   */
  async pendingApprovals(goalId?: string): Promise<(ApprovalRecord & { goalId: string })[]> {
    const [seconds, micros] = await this.redis.time();
    const now = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    if (goalId) {
      if (isTerminal((await this.get(goalId)).status)) return [];
      const records = await this.approvals.records(goalId);
      return records.filter((r) => isAwaitingDecision(r, now)).map((r) => ({ ...r, goalId }));
    }
    const out: (ApprovalRecord & { goalId: string })[] = [];
    const live = new Map<string, boolean>();
    for (const p of await this.approvals.pendingAll(1000, now)) {
      if (!live.has(p.goalId)) live.set(p.goalId, await this.isLive(p.goalId));
      const r = live.get(p.goalId) ? await this.approvals.record(p.goalId, p.callId) : null;
      if (r && isAwaitingDecision(r, now)) out.push({ ...r, goalId: p.goalId });
    }
    return out;
  }

  /** The goal exists and has not ended. */
  private async isLive(goalId: string): Promise<boolean> {
    const status = await this.redis.hget(this.goals.keys.goal(goalId), 'status');
    return status !== null && !isTerminal(status);
  }
}

function pendingApproval(r: ApprovalRecord): PendingApproval {
  const { callId, tool, role, step, index, requestedAt, expiresAt } = r;
  return { callId, tool, role, step, index, requestedAt, expiresAt };
}
