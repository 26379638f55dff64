// Where artifacts over the spill threshold live. The hash keeps only a pointer (blobRef).
// Storage sits behind this small protocol; the directory store is the default (a shared
// volume in compose and k8s).
//
// The directory store is private: its root and every directory it creates are 0700, its files
// 0600 (set with chmod, whatever the umask), and an existing root is tightened to 0700 on first
// use. Only names that are goal ids are ever treated as goals: a directory named anything else
// (`<goalId>:files`, say) is neither listed nor deleted.
import { randomBytes } from 'node:crypto';
import type { Dirent, ReadStream } from 'node:fs';
import { chmod, lstat, mkdir, open, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { ConfigError } from '../errors.ts';
import { GOAL_ID_PATTERN, isGoalId } from '../goal/ids.ts';

export interface BlobStore {
  put(goalId: string, content: string): Promise<string>;
  get(ref: string): Promise<string>;
  delete(ref: string): Promise<void>;
  deleteGoal(goalId: string): Promise<void>;
  /** The goal ids that have blobs (names that are not goal ids are never listed). */
  listGoals(): Promise<string[]>;
  /**
   * Removes the goal's blobs that no ref in `keep` names, and leftovers of interrupted writes,
   * last modified before `olderThan` (epoch ms). Returns how many files went.
   */
  pruneGoal(goalId: string, keep: ReadonlySet<string>, olderThan: number): Promise<number>;
  /**
   * The store's owner, a deployment id: `id` claims a store that has none. Returns the owner, so
   * a sweep can tell a store another deployment (another Redis, the same dir and prefix) uses.
   */
  claimOwner(id: string): Promise<string>;
  /** The store's owner, or null while none has claimed it. */
  owner(): Promise<string | null>;
}

/** The owner's deployment id, beside the goal folders (not a goal id: never listed as one). */
const OWNER_FILE = '.owner';
const DIR_MODE = 0o700;
const FILE_MODE = 0o600;
const BLOB_NAME = '[a-f0-9]{64}';
const REF_RE = new RegExp(`^${GOAL_ID_PATTERN}/${BLOB_NAME}$`);
const BLOB_RE = new RegExp(`^${BLOB_NAME}$`);
/** `<blob>.<pid>.<random>.tmp`: a write in flight, or the leftover of one that died. */
const TMP_RE = new RegExp(`^${BLOB_NAME}\\.[0-9]+\\.[a-z0-9]+\\.tmp$`);

/** mkdir -p, with every directory it creates 0700 whatever the umask. */
async function mkdirPrivate(dir: string): Promise<void> {
  const first = await mkdir(dir, { recursive: true, mode: DIR_MODE });
  if (first === undefined) return;
  for (let d = dir; d.startsWith(first); d = dirname(d)) {
    await chmod(d, DIR_MODE);
    if (d === first) break;
  }
}

export class DirBlobStore implements BlobStore {
  readonly root: string;
  private rootReady: Promise<void> | undefined;
  constructor(
    private readonly dir: string,
    prefix: string,
  ) {
    this.root = resolve(dir, prefix);
  }

  /** A file where the store's folders go, or folders it may not make: the setting's fault (exit 78). */
  private notADirectory(err: unknown): unknown {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOTDIR' || code === 'EEXIST')
      return new ConfigError(`DEEPQ_BLOB_DIR ${this.dir}: a file is in the way of its folder ${this.root}`);
    if (code === 'EACCES' || code === 'EPERM' || code === 'EROFS')
      return new ConfigError(`DEEPQ_BLOB_DIR ${this.dir}: cannot make or own its folder ${this.root} (${code})`);
    return err;
  }

  /** The store can be written: made if missing, or failing with the setting to change (a ConfigError). */
  ready(): Promise<void> {
    return this.ensureRoot();
  }

  private path(ref: string): string {
    // Refs come from our own hash, but never trust a path built from stored data.
    if (!REF_RE.test(ref)) throw new Error(`bad blob ref ${JSON.stringify(ref)}`);
    return join(this.root, ref);
  }

  private goalDir(goalId: string): string {
    if (!isGoalId(goalId)) throw new Error(`bad goal id ${JSON.stringify(goalId)}`);
    return join(this.root, goalId);
  }

  /**
   * Creates the root (0700) or tightens an existing one to 0700, once per store. A root we do
   * not own fails here (chmod: EPERM), so nothing is ever written into someone else's directory.
   */
  private ensureRoot(): Promise<void> {
    this.rootReady ??= (async () => {
      await mkdirPrivate(this.root);
      await chmod(this.root, DIR_MODE);
    })().catch((err: unknown) => {
      this.rootReady = undefined;
      throw this.notADirectory(err);
    });
    return this.rootReady;
  }

  /**
   * Every put gets a fresh ref, never a content hash: two entries (two names, or two versions
   * of one name racing) must never share a blob, or evicting or overwriting one would delete
   * the other's content.
   */
  async put(goalId: string, content: string): Promise<string> {
    const name = randomBytes(32).toString('hex');
    const dir = this.goalDir(goalId);
    await this.ensureRoot();
    await mkdirPrivate(dir);
    const file = join(dir, name);
    // Write then rename, so a reader never sees half a blob. `wx`: never through a planted file.
    const tmp = `${file}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
    try {
      const fh = await open(tmp, 'wx', FILE_MODE);
      try {
        await fh.chmod(FILE_MODE);
        await fh.writeFile(content, 'utf8');
      } finally {
        await fh.close();
      }
      await rename(tmp, file);
    } catch (err) {
      await rm(tmp, { force: true }).catch(() => {});
      throw err;
    }
    return `${goalId}/${name}`;
  }

  async get(ref: string): Promise<string> {
    return readFile(this.path(ref), 'utf8');
  }

  /**
   * A blob as a UTF-8 text stream (the web inspector sends spilled content without holding it
   * whole). Opened before it returns: ENOENT surfaces here, and a blob deleted afterwards
   * (overwritten, evicted) still reads to its end.
   */
  async openStream(ref: string): Promise<ReadStream> {
    const fh = await open(this.path(ref), 'r');
    return fh.createReadStream({ encoding: 'utf8' });
  }

  async delete(ref: string): Promise<void> {
    await rm(this.path(ref), { force: true });
  }

  async deleteGoal(goalId: string): Promise<void> {
    if (!isGoalId(goalId)) return;
    await rm(join(this.root, goalId), { recursive: true, force: true });
  }

  async claimOwner(id: string, rootRemoved = false): Promise<string> {
    // A root removed under us is made again, with no owner yet.
    if (rootRemoved) this.rootReady = undefined;
    await this.ensureRoot();
    const file = join(this.root, OWNER_FILE);
    try {
      await writeFile(file, id, { flag: 'wx', mode: FILE_MODE });
      return id;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' && !rootRemoved) return this.claimOwner(id, true);
      if (code !== 'EEXIST') throw err;
    }
    return (await readFile(file, 'utf8')).trim();
  }

  async owner(): Promise<string | null> {
    try {
      return (await readFile(join(this.root, OWNER_FILE), 'utf8')).trim();
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw this.notADirectory(err);
    }
  }

  async listGoals(): Promise<string[]> {
    try {
      await this.ensureRoot();
      const entries = await readdir(this.root, { withFileTypes: true });
      return entries.filter((d) => d.isDirectory() && isGoalId(d.name)).map((d) => d.name);
    } catch {
      return [];
    }
  }

  async pruneGoal(goalId: string, keep: ReadonlySet<string>, olderThan: number): Promise<number> {
    if (!isGoalId(goalId)) return 0;
    const dir = join(this.root, goalId);
    let entries: Dirent[];
    try {
      entries = await readdir(dir, { withFileTypes: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 0;
      throw err;
    }
    // Only our own names: an unreferenced blob, or a write's temp file. Never a referenced blob.
    const candidates = entries
      .filter((d) => d.isFile())
      .map((d) => d.name)
      .filter((n) => (BLOB_RE.test(n) && !keep.has(`${goalId}/${n}`)) || TMP_RE.test(n));
    const removed = await Promise.all(
      candidates.map(async (n) => {
        const file = join(dir, n);
        const st = await lstat(file).catch(() => null);
        if (!st?.isFile() || st.mtimeMs >= olderThan) return 0;
        await rm(file, { force: true });
        return 1;
      }),
    );
    return removed.reduce<number>((a, b) => a + b, 0);
  }
}
