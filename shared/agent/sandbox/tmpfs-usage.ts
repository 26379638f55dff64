// Under bubblewrap the work dir, /tmp and /dev/shm are tmpfs mounts inside the sandbox. While the
// program runs, what they hold is asked of the kernel (statfs through the keeper's
// /proc/<pid>/root: mount points on a read-only root, which the program cannot swap), never
// walked by name: a folder it swaps for a symlink meanwhile would lead a walk to the host's
// paths (and its verdict would tell the program what exists there).
import { statfs } from 'node:fs/promises';
import { SANDBOX_WORK } from './command.ts';

/** The sandbox's tmpfs mounts besides the work dir; each bounded in bytes by its size. */
const TEMP_MOUNTS = ['/tmp', '/dev/shm'];

export interface TmpfsUsage {
  /** Bytes the work dir's files and folders take (deleted files still held open included). */
  workBytes: number;
  /**
   * Names in the fullest mount. A tmpfs bounds bytes, not names: empty files, folders and short
   * symlinks take kernel memory its size never counts (a million of them, about 1.8 GB).
   */
  mostEntries: number;
  /** A temp mount (/tmp, /dev/shm) is full: a write there failed with ENOSPC. */
  tempFull: boolean;
}

/** Free space under which a mount counts as full: less than a few pages is no room for a write. */
const FULL_BELOW_BYTES = 64 * 1024;

/** What one mount holds: its used blocks in bytes and its used inodes (its own root left out). */
async function mountUsage(path: string): Promise<{ bytes: number; entries: number; full: boolean }> {
  const s = await statfs(path);
  const full = s.bavail * s.bsize < FULL_BELOW_BYTES;
  return { bytes: (s.blocks - s.bfree) * s.bsize, entries: Math.max(0, s.files - s.ffree - 1), full };
}

/** The usage of the sandbox whose root (seen from the host) is `root`: `/proc/<keeper pid>/root`. */
export async function tmpfsUsage(root: string): Promise<TmpfsUsage> {
  const [work, ...temps] = await Promise.all([SANDBOX_WORK, ...TEMP_MOUNTS].map((m) => mountUsage(root + m)));
  const mostEntries = Math.max(work!.entries, ...temps.map((t) => t.entries));
  return { workBytes: work!.bytes, mostEntries, tempFull: temps.some((t) => t.full) };
}
