// The approval timeout, applied without a worker: each sweep (a BullMQ job scheduler) decides
// every pending call past its expiresAt `timeout` and promotes its paused job, so the call
// stops being pending (gauge, `deepq approvals`, `deepq status`) even when no worker of the
// role runs; the job resumes with the refusal whenever one does. A worker resuming first
// decides the same timeout itself: the decide script lets exactly one of them do it.
import { promotePaused, timeoutReason } from '../../shared/goal/approvals.ts';
import type { Runtime } from '../../shared/runtime/runtime.ts';

/** Times out the expired pending calls; returns how many this run decided. */
export async function expireApprovals(rt: Runtime, now = Date.now()): Promise<number> {
  let decided = 0;
  for (const { goalId, callId } of await rt.approvals.expiredPending(now)) {
    const rec = await rt.approvals.record(goalId, callId);
    if (!rec) {
      await rt.approvals.dropPending(goalId, callId); // its goal's keys are gone: never decidable
      continue;
    }
    const d = await rt.approvals.decide(goalId, callId, 'timeout', timeoutReason(rec), now);
    if (d.kind === 'no_goal' || d.kind === 'no_call') await rt.approvals.dropPending(goalId, callId);
    if (d.kind !== 'ok') continue;
    decided++;
    rt.metrics.approvals.inc({ decision: 'timeout' });
    rt.logger.info({ goalId, callId, tool: d.record.tool }, 'approval timed out: the call is refused');
    if (d.pendingLeft === 0) await promotePaused(rt.queues, d.record);
  }
  return decided;
}
