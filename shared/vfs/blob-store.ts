// Where artifacts over the spill threshold live. The hash keeps only a pointer (blobRef).
// Storage sits behind this small protocol; the directory store is the default (a shared
// volume in compose and k8s).
import { randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { GOAL_ID_PATTERN, isGoalId } from '../goal/ids.ts';

export interface BlobStore {
  put(goalId: string, content: string): Promise<string>;
  get(ref: string): Promise<string>;
  delete(ref: string): Promise<void>;
  deleteGoal(goalId: string): Promise<void>;
  listGoals(): Promise<string[]>;
}

const REF_RE = new RegExp(`^${GOAL_ID_PATTERN}/[a-f0-9]{64}$`);

export class DirBlobStore implements BlobStore {
  readonly root: string;
  constructor(dir: string, prefix: string) {
    this.root = resolve(dir, prefix);
  }

  private path(ref: string): string {
    // Refs come from our own hash, but never trust a path built from stored data.
    if (!REF_RE.test(ref)) throw new Error(`bad blob ref ${JSON.stringify(ref)}`);
    return join(this.root, ref);
  }

  /**
   * Every put gets a fresh ref, never a content hash: two entries (two names, or two versions
   * of one name racing) must never share a blob, or evicting or overwriting one would delete
   * the other's content.
   */
  async put(goalId: string, content: string): Promise<string> {
    const ref = `${goalId}/${randomBytes(32).toString('hex')}`;
    const file = this.path(ref);
    await mkdir(join(this.root, goalId), { recursive: true });
    // Write then rename, so a reader never sees half a blob.
    const tmp = `${file}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
    await writeFile(tmp, content, 'utf8');
    await rename(tmp, file);
    return ref;
  }

  async get(ref: string): Promise<string> {
    return readFile(this.path(ref), 'utf8');
  }

  async delete(ref: string): Promise<void> {
    await rm(this.path(ref), { force: true });
  }

  async deleteGoal(goalId: string): Promise<void> {
    if (!isGoalId(goalId)) return;
    await rm(join(this.root, goalId), { recursive: true, force: true });
  }

  async listGoals(): Promise<string[]> {
    try {
      return (await readdir(this.root, { withFileTypes: true })).filter((d) => d.isDirectory()).map((d) => d.name);
    } catch {
      return [];
    }
  }
}
