// A subtask's artifact recorded `done` by its own job: the subtask finished, whatever came of
// the job after the write (its lock lost before BullMQ stored the return, a stalled check that
// handed it out again or failed it). Such a job is not run again nor counted failed.
import type { FileEntry, VirtualFs } from '../vfs/vfs.ts';

export interface SubtaskRef {
  goalId: string;
  step: number;
  expected_artifact: string;
}

export async function finishedArtifact(vfs: VirtualFs, ref: SubtaskRef, jobId: string): Promise<FileEntry | null> {
  const entry = await vfs.stat(ref.goalId, ref.expected_artifact);
  return isFinishedBy(entry, ref.step, jobId) ? entry : null;
}

/** Only the run's result write is `done` (tool writes are `active`); the job id names the cycle. */
export function isFinishedBy(entry: FileEntry | null | undefined, step: number, jobId: string): boolean {
  return entry?.status === 'done' && entry.writer === jobId && entry.step === step;
}

/**
 * A subtask that ended without finishing (failed for good, or stopped partial with no text of its
 * own) and had written its artifact with a tool: that working copy, to be recorded as the run's
 * output. Through vfsWrite.lua's keepDone a revision's working copy then goes to the history and
 * the done version it was to revise is current again. '' when the current entry is not its own.
 */
export async function unfinishedWorkingCopy(vfs: VirtualFs, ref: SubtaskRef, jobId: string): Promise<string> {
  const entry = await vfs.stat(ref.goalId, ref.expected_artifact);
  if (!entry || entry.writer !== jobId || entry.status === 'done' || entry.status === 'evicted') return '';
  return (await vfs.read(ref.goalId, ref.expected_artifact)) ?? '';
}

/**
 * After a subtask failed for good: its tool-written working copy is marked failed and, for a
 * revision, the done version it was to revise is put back (an `end` must not ship a half-done
 * draft, nor the next planner see finished work as unfinished). Idempotent: the worker's hook
 * and the reflector may both call it.
 */
export async function settleFailedArtifact(
  vfs: VirtualFs,
  ref: SubtaskRef & { role: string },
  jobId: string,
): Promise<void> {
  const content = await unfinishedWorkingCopy(vfs, ref, jobId);
  if (!content) return;
  const meta = { status: 'failed' as const, step: ref.step, role: ref.role, writer: jobId, keepDone: true };
  await vfs.write(ref.goalId, ref.expected_artifact, content, meta);
}
