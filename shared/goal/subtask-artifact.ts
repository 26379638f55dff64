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
