// Between two walks of a run's work dir (every 250 ms), what the program writes is followed as
// it happens: inotify on the work dir's top and on each folder a walk found (up to
// WATCHED_FOLDERS_MAX). A file made or written is measured alone (one lstat) and its change
// added to the last walk's total, so a program writing files as fast as the disk takes them is
// stopped after a file or two, for an lstat per written file rather than a walk per write (a walk
// of 2,000 names costs about 100 ms of CPU). A folder made asks for a walk: it may hold more
// already. Each walk's total replaces the running one.
import { type FSWatcher, watch } from 'node:fs';
import { lstat } from 'node:fs/promises';
import { join } from 'node:path';
import { diskBytes, type Walk } from './workdir.ts';

/** Folders of a run's work dir watched (each a kernel inotify watch). */
const WATCHED_FOLDERS_MAX = 64;
/** Names changed since the last batch past which a walk is asked for instead of an lstat each. */
const PENDING_MAX = 1000;

export interface WorkDirEvents {
  /** The running total went past the limit. */
  over(): void;
  /** A folder was made (or a change could not be placed): a walk should measure it all. */
  walkNeeded(): void;
}

/**
 * The work dir's watched folders and running total. A folder the program swapped for a symlink
 * meanwhile may get a watch, or an lstat, on what it points to: that only adds to the total
 * (a kill sooner, never later) or asks for a walk; nothing is read or written there.
 */
export class WorkDirWatch {
  private readonly folders = new Map<string, FSWatcher | null>();
  /** Disk bytes of each file as the last walk saw it, and of each written since. */
  private seen = new Map<string, number>();
  private readonly since = new Map<string, number>();
  private total = 0;
  private readonly pending = new Set<string>();
  private flushing = false;
  private closed = false;

  constructor(
    private readonly root: string,
    private readonly limit: number,
    private readonly events: WorkDirEvents,
  ) {
    this.watchFolder('');
  }

  /** A walk's result: the running total starts again from it, and its folders are watched. */
  walked(w: Walk): void {
    this.seen = new Map(w.entries.map((e) => [e.name, e.disk]));
    this.since.clear();
    this.total = w.bytes;
    for (const dir of w.dirs) this.watchFolder(dir);
  }

  close(): void {
    this.closed = true;
    for (const w of this.folders.values()) w?.close();
    this.folders.clear();
  }

  private watchFolder(dir: string): void {
    if (this.folders.has(dir) || this.folders.size >= WATCHED_FOLDERS_MAX) return;
    let w: FSWatcher | null = null;
    try {
      w = watch(join(this.root, dir), { persistent: false }, (_e, name) => this.changed(dir, name));
      w.on('error', () => w?.close());
    } catch {
      // Gone already, or out of inotify watches: the walks measure it.
    }
    this.folders.set(dir, w);
  }

  private changed(dir: string, name: string | Buffer | null): void {
    if (this.closed) return;
    if (name === null || this.pending.size >= PENDING_MAX) {
      this.events.walkNeeded();
      return;
    }
    this.pending.add(join(dir, name.toString()));
    if (!this.flushing) setImmediate(() => void this.flush());
  }

  /** Measures each name changed since the last batch and adds the changes to the total. */
  private async flush(): Promise<void> {
    this.flushing = true;
    const names = [...this.pending];
    this.pending.clear();
    const sizes = await Promise.all(names.map((n) => this.diskOf(n)));
    this.flushing = false;
    if (this.closed) return;
    for (const [i, name] of names.entries()) {
      const disk = sizes[i]!;
      if (disk === 'folder') {
        this.events.walkNeeded();
        continue;
      }
      this.total += disk - (this.since.get(name) ?? this.seen.get(name) ?? 0);
      this.since.set(name, disk);
    }
    if (this.total > this.limit) this.events.over();
    if (this.pending.size) setImmediate(() => void this.flush());
  }

  /** What a name takes now (a file's diskBytes; 0 for anything else, or gone), or 'folder'. */
  private diskOf(name: string): Promise<number | 'folder'> {
    return lstat(join(this.root, name)).then(
      (s) => (s.isDirectory() ? 'folder' : s.isFile() ? diskBytes(s) : 0),
      () => 0,
    );
  }
}
