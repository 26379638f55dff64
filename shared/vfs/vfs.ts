// The virtual filesystem: a goal's artifacts in two Redis hashes (metadata, inline content),
// large contents spilled to the blob store. Writes are atomic and idempotent (lua/vfsWrite.lua).
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { type TranscriptWrite, withTranscript } from '../agent/transcripts.ts';
import { fromScriptError, VfsLimitError } from '../errors.ts';
import { storedEvent, type TimelineEventBody } from '../goal/events.ts';
import { newOperationId } from '../goal/ids.ts';
import { Keys } from '../goal/keys.ts';
import { runScript } from '../runtime/scripts.ts';
import { artifactNameProblem } from './artifact-name.ts';
import type { BlobStore } from './blob-store.ts';

export type EntryStatus = 'active' | 'done' | 'failed' | 'evicted';

export interface FileEntry {
  name: string;
  status: EntryStatus;
  step: number;
  bytes: number;
  role?: string;
  threadId?: string;
  version: number;
  updatedAt: number;
  writer?: string;
  blobRef?: string;
  evictedStep?: number;
  reason?: string;
  /** The last write's operation id: the same write sent again (a lost reply) changes nothing. */
  op?: string;
  /** A file the goal started with (`enqueue --file`): never aged out; a planned revision replaces it. */
  input?: true;
}

export interface VfsOptions {
  spillBytes: number;
  maxArtifactBytes: number;
  maxFilesPerGoal: number;
  evictDoneAfterSteps: number;
  evictAnyAfterSteps: number;
  keyTtlSeconds: number;
  eventsMaxLen: number;
  /**
   * Cycles a tombstone stays in the index after its eviction (default 1): the reflector of
   * the evicting cycle and the next planner see it, the next eviction drops it. The planner
   * learns the name is gone exactly when its prior plan may still name it; longer retention
   * only grows every prompt (P51).
   */
  tombstoneSteps?: number;
}

export interface WriteMeta {
  status: Exclude<EntryStatus, 'evicted'>;
  step: number;
  role?: string;
  threadId?: string;
  /** Who writes: a retry by the same writer overwrites in place. */
  writer: string;
  /** Optimistic concurrency: the version the writer last saw (0 = must not exist). */
  expectedVersion?: number;
  /**
   * With expectedVersion: the op of the entry the writer read. Any write since, by anyone (a
   * retried writer rewrites in place at the same version), is a conflict.
   */
  expectedOp?: string;
  /** A subtask's artifact: a new version of a `done` one keeps the old in the history. */
  keepHistory?: boolean;
  /** A tool's write to another subtask's artifact: a `done` one is refused (DONE_ARTIFACT), not replaced. */
  refuseDone?: boolean;
  /**
   * A subtask's last write of a run that did not finish: as keepHistory, but the done version it
   * was to revise stays current (or is put back over the run's own tool writes); this goes to the history.
   */
  keepDone?: boolean;
  /** A timeline event that lands with the write, atomically (a subtask's `subtask_finished`). */
  event?: TimelineEventBody;
  /** The writing run's transcript (and its last call's usage), stored in the same script. */
  transcript?: TranscriptWrite;
  /**
   * The writing job's lock: a write from a run whose job another worker took since (the lock
   * expired before this run learnt of it) is refused with LockLostError, nothing changed.
   */
  lock?: JobLock;
  /** A job's last write of its run: the job's checkpoint goes with it (the run is over). */
  endsCheckpointOf?: string;
  /** A file the goal starts with: kept until the goal goes (vfsEvict.lua passes it by). */
  input?: boolean;
}

/** A BullMQ job's lock key and the token of the delivery that holds it. */
export interface JobLock {
  key: string;
  token: string;
}

/** Transcript arguments of vfsWrite.lua (ARGV[12..27]): padded, so that the lock token has a fixed place. */
const TRANSCRIPT_ARGS = 16;

export interface EvictedEntry {
  name: string;
  reason: 'done_aged' | 'max_age';
}

export interface VfsObserver {
  onEvicted?(reason: string, count: number): void;
  onWrite?(bytes: number, spilled: boolean): void;
}

export class VirtualFs {
  readonly keys: Keys;
  constructor(
    readonly redis: Redis,
    prefix: string,
    readonly blobs: BlobStore,
    readonly opts: VfsOptions,
    readonly observer: VfsObserver = {},
  ) {
    this.keys = new Keys(prefix);
  }

  private blobStoreOwned: Promise<void> | undefined;

  /**
   * The blob store's owner and this deployment's id (made once per Redis and prefix): the first
   * deployment to spill or sweep claims the store. Another one (the same DEEPQ_BLOB_DIR and
   * prefix, another Redis) must neither sweep it (its goals have no hash there) nor write to it
   * (the owner's sweep would take those blobs for orphans).
   */
  async blobStoreOwner(): Promise<{ owner: string; deployment: string }> {
    const key = this.keys.deployment();
    await this.redis.set(key, randomUUID(), 'NX');
    const deployment = (await this.redis.get(key)) ?? '';
    return { owner: await this.blobs.claimOwner(deployment), deployment };
  }

  /**
   * Why a spill from this process would not land where the services read, or null: the store
   * here is this deployment's, or no deployment has claimed one yet (nothing to tell by). A
   * producer on another machine, with a blob dir of its own, would write blobs no service can
   * read (`unclaimed`); one whose dir another deployment claimed would be refused (`other`).
   */
  async blobStoreMismatch(): Promise<'unclaimed' | 'other' | null> {
    const deployment = await this.redis.get(this.keys.deployment());
    if (deployment === null) return null;
    const owner = await this.blobs.owner();
    if (owner === deployment) return null;
    return owner === null ? 'unclaimed' : 'other';
  }

  /** Once per process, before its first spill: a store another deployment owns refuses the write. */
  private ownBlobStore(): Promise<void> {
    this.blobStoreOwned ??= this.blobStoreOwner().then(({ owner, deployment }) => {
      if (owner !== deployment) throw new BlobStoreOwnedError(owner, deployment);
    });
    // Only a claim that held is kept: after a refusal (its owner may give the store up by
    // removing .owner) or a failure, the next spill asks again.
    const owned = this.blobStoreOwned;
    owned.catch(() => {
      if (this.blobStoreOwned === owned) this.blobStoreOwned = undefined;
    });
    return owned;
  }

  /** Throws VfsLimitError naming the rule a name or size breaks. */
  check(name: string, content: string): number {
    const problem = artifactNameProblem(name);
    if (problem) throw new VfsLimitError(problem, true);
    const bytes = Buffer.byteLength(content, 'utf8');
    this.checkSize(name, bytes);
    return bytes;
  }

  /** Throws VfsLimitError when an artifact of `bytes` (at least, if counting stopped) is over the limit. */
  checkSize(name: string, bytes: number, atLeast = false): void {
    if (bytes <= this.opts.maxArtifactBytes) return;
    const size = `${atLeast ? 'at least ' : ''}${bytes}`;
    throw new VfsLimitError(`artifact ${name} is ${size} bytes (max ${this.opts.maxArtifactBytes})`);
  }

  /**
   * Writes an artifact. A write that fails (a limit, a version conflict, Redis) still stores the
   * transcript it carried: the run happened and spent tokens, so its record stays.
   */
  write(goalId: string, name: string, content: string, meta: WriteMeta): Promise<FileEntry> {
    return withTranscript({ redis: this.redis }, meta.transcript, () => this.writeEntry(goalId, name, content, meta));
  }

  private async writeEntry(goalId: string, name: string, content: string, meta: WriteMeta): Promise<FileEntry> {
    const bytes = this.check(name, content);
    const spill = bytes > this.opts.spillBytes;
    if (spill) await this.ownBlobStore();
    const blobRef = spill ? await this.blobs.put(goalId, content) : undefined;
    const entry: Omit<FileEntry, 'version' | 'name'> = {
      status: meta.status,
      step: meta.step,
      bytes,
      role: meta.role,
      threadId: meta.threadId,
      updatedAt: Date.now(),
      ...(blobRef ? { blobRef } : {}),
      ...(meta.input ? { input: true as const } : {}),
    };
    const version = await this.store(goalId, name, entry, spill ? null : content, meta, blobRef);
    this.observer.onWrite?.(bytes, spill);
    return { name, version, ...entry, writer: meta.writer };
  }

  /**
   * Deletes an artifact: a tombstone in the eviction format (the planner sees the name is gone;
   * the next eviction drops it), as a new version through the same versioned write; its inline
   * content and its blob go.
   */
  async delete(goalId: string, name: string, meta: Omit<WriteMeta, 'status'>): Promise<void> {
    this.check(name, '');
    const { step, role, threadId } = meta;
    const tombstone: Omit<FileEntry, 'version' | 'name'> = {
      status: 'evicted',
      step,
      evictedStep: step,
      reason: 'deleted',
      bytes: 0,
      role,
      threadId,
      updatedAt: Date.now(),
    };
    await this.store(goalId, name, tombstone, null, meta);
  }

  /** One atomic write (lua/vfsWrite.lua); `inline` null keeps no content in Redis. Returns the version. */
  private async store(
    goalId: string,
    name: string,
    entry: Omit<FileEntry, 'version' | 'name'>,
    inline: string | null,
    meta: Omit<WriteMeta, 'status'>,
    blobRef?: string,
  ): Promise<number> {
    let res: [number, string, string?];
    try {
      res = (await runScript(
        this.redis,
        'vfsWrite',
        [
          this.keys.files(goalId),
          this.keys.content(goalId),
          this.keys.goal(goalId),
          this.keys.history(goalId),
          this.keys.events(goalId),
          // Untouched without a transcript: a script's key count is fixed.
          meta.transcript?.keys[0] ?? this.keys.transcript(goalId, ''),
          this.keys.threads(goalId),
          this.keys.reservations(goalId),
          // Untouched without a lock, as above.
          meta.lock?.key ?? this.keys.files(goalId),
          this.keys.checkpoints(goalId),
        ],
        [
          name,
          JSON.stringify({ ...entry, op: newOperationId() }),
          inline ?? '',
          inline === null ? '0' : '1',
          expectation(meta),
          meta.writer,
          this.opts.maxFilesPerGoal,
          this.opts.keyTtlSeconds,
          writeMode(meta),
          meta.event ? storedEvent(meta.event) : '',
          this.opts.eventsMaxLen,
          ...transcriptArgs(meta.transcript),
          meta.lock?.token ?? '',
          meta.endsCheckpointOf ?? '',
        ],
      )) as [number, string, string?];
    } catch (err) {
      const refused = fromScriptError(err);
      // Blob refs are unique per put: a refused write's blob is ours alone, so it goes now.
      // Any other error (a lost connection) may have come after the script ran: keep the
      // blob then; if no entry points to it, the sweep's orphan-blob pass removes it once it is
      // older than vfs.orphanBlobGraceSeconds (or with the whole goal, whichever comes first).
      if (refused && blobRef) await this.blobs.delete(blobRef).catch(() => {});
      throw refused ?? err;
    }
    const [version, oldBlobs, doneKept] = res;
    for (const old of oldBlobs.split(' ')) if (old && old !== blobRef) await this.blobs.delete(old);
    // The done version stayed current and this output was not stored: nothing points to its blob.
    if (doneKept === 'dropped' && blobRef) await this.blobs.delete(blobRef);
    return Number(version);
  }

  async stat(goalId: string, name: string): Promise<FileEntry | null> {
    const raw = await this.redis.hget(this.keys.files(goalId), name);
    return raw ? { name, ...(JSON.parse(raw) as Omit<FileEntry, 'name'>) } : null;
  }

  /** Returns the content, read transparently from the blob store when spilled; null if absent. */
  async read(goalId: string, name: string): Promise<string | null> {
    for (let attempt = 1; ; attempt++) {
      // Back to back, not a MULTI (two commands fewer): a write landing between the two reads
      // leaves an inline entry without its content, read again; newer content is the latest.
      const [raw, inline] = await Promise.all([
        this.redis.hget(this.keys.files(goalId), name),
        this.redis.hget(this.keys.content(goalId), name),
      ]);
      if (!raw) return null;
      const entry = JSON.parse(raw) as FileEntry;
      if (entry.status === 'evicted') return null;
      if (!entry.blobRef && inline === null && attempt < 3) continue;
      if (!entry.blobRef) return inline ?? '';
      try {
        return await this.blobs.get(entry.blobRef);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
        // Overwritten or evicted between the hash read and the blob read: the old blob is
        // gone by design, so read the entry again. An unchanged entry without its blob is loss.
        const now = await this.redis.hget(this.keys.files(goalId), name);
        if (now !== raw && attempt < 5) continue;
        throw new Error(
          `artifact ${name} of goal ${goalId}: its spilled content (${entry.blobRef}) is missing from the blob store`,
        );
      }
    }
  }

  /**
   * Earlier versions of an artifact kept when it was revised (a new version over a `done`
   * one), newest first, with their contents (read from the blob store when spilled).
   */
  async history(goalId: string, name: string): Promise<(FileEntry & { content: string | null })[]> {
    const all = await this.redis.hgetall(this.keys.history(goalId));
    const out: (FileEntry & { content: string | null })[] = [];
    for (const [key, raw] of Object.entries(all)) {
      if (key.slice(0, key.lastIndexOf('@')) !== name) continue;
      const { content, ...entry } = JSON.parse(raw) as Omit<FileEntry, 'name'> & { content?: string };
      const text = content ?? (entry.blobRef ? await this.blobs.get(entry.blobRef).catch(() => null) : '');
      out.push({ name, ...entry, content: text });
    }
    return out.sort((a, b) => b.version - a.version);
  }

  /**
   * The index: every entry's metadata (tombstones included), never contents, oldest step first;
   * from `flat` (name, entry pairs) when a script read it already.
   */
  async index(goalId: string, flat?: string[]): Promise<FileEntry[]> {
    const pairs: [string, string][] = [];
    if (flat) for (let i = 0; i + 1 < flat.length; i += 2) pairs.push([flat[i]!, flat[i + 1]!]);
    const all = flat ? pairs : Object.entries(await this.redis.hgetall(this.keys.files(goalId)));
    return all
      .map(([name, raw]) => ({ name, ...(JSON.parse(raw) as Omit<FileEntry, 'name'>) }))
      .sort((a, b) => a.step - b.step || a.name.localeCompare(b.name));
  }

  /**
   * Until a step past both ages, no entry can be old enough (steps start at 0 and only grow):
   * most goals end before eviction has anything to do. Only a deleted name's tombstone can be
   * dropped then, so the index (`flat`, as a move read it) must hold none; unknown, it runs.
   */
  evictionIsIdle(currentStep: number, flat: string[] | undefined): boolean {
    if (currentStep > Math.min(this.opts.evictDoneAfterSteps, this.opts.evictAnyAfterSteps)) return false;
    if (!flat) return false;
    for (let i = 1; i < flat.length; i += 2) {
      if ((JSON.parse(flat[i]!) as Pick<FileEntry, 'status'>).status === 'evicted') return false;
    }
    return true;
  }

  /** The cycle's eviction; `flat` is the files index a move read (it may show there is nothing to do). */
  async evict(goalId: string, currentStep: number, index?: string[]): Promise<EvictedEntry[]> {
    if (this.evictionIsIdle(currentStep, index)) return [];
    const [flat, historyBlobs] = (await runScript(
      this.redis,
      'vfsEvict',
      [this.keys.files(goalId), this.keys.content(goalId), this.keys.events(goalId), this.keys.history(goalId)],
      [
        currentStep,
        this.opts.evictDoneAfterSteps,
        this.opts.evictAnyAfterSteps,
        Date.now(),
        this.opts.eventsMaxLen,
        Math.max(1, this.opts.tombstoneSteps ?? 1),
        this.opts.keyTtlSeconds,
      ],
    )) as [string[], string[]];
    const out: EvictedEntry[] = [];
    for (let i = 0; i < flat.length; i += 3) {
      out.push({ name: flat[i]!, reason: flat[i + 1] as EvictedEntry['reason'] });
      if (flat[i + 2]) await this.blobs.delete(flat[i + 2]!);
    }
    for (const ref of historyBlobs) await this.blobs.delete(ref);
    for (const reason of ['done_aged', 'max_age'] as const) {
      const n = out.filter((e) => e.reason === reason).length;
      if (n) this.observer.onEvicted?.(reason, n);
    }
    return out;
  }
}

/** The compact index line format planner and reflector see: name, status, bytes. */
export function formatIndex(entries: FileEntry[]): string {
  if (entries.length === 0) return '(no files)';
  return entries
    .map((e) => {
      if (e.status === 'evicted') return `- ${e.name} [evicted]`;
      return `- ${e.name} [${e.input ? 'input' : e.status}, ${e.bytes} bytes]`;
    })
    .join('\n');
}

/** vfsWrite.lua's ARGV[9]: how a write treats a `done` version by another writer. */
function writeMode(meta: Omit<WriteMeta, 'status'>): string {
  if (meta.keepDone) return '3';
  return meta.keepHistory ? '1' : meta.refuseDone ? '2' : '0';
}

/** A spill refused: the blob store is another deployment's (the same blob dir and prefix, another Redis). */
export class BlobStoreOwnedError extends Error {
  override name = 'BlobStoreOwnedError';
  constructor(
    readonly owner: string,
    readonly deployment: string,
  ) {
    super(
      `the blob store belongs to another deployment (${owner}; this one is ${deployment}): the same ` +
        'DEEPQ_BLOB_DIR and DEEPQ_PREFIX with another Redis; give each deployment its own DEEPQ_BLOB_DIR ' +
        "(if this Redis lost its data, remove the store's .owner file to claim it)",
    );
  }
}

/** vfsWrite.lua's ARGV[5]: '' (any), the expected version, or `<version>:<op>` (the entry read). */
function expectation(meta: Pick<WriteMeta, 'expectedVersion' | 'expectedOp'>): string {
  if (meta.expectedVersion === undefined) return '';
  return meta.expectedOp ? `${meta.expectedVersion}:${meta.expectedOp}` : String(meta.expectedVersion);
}

/** vfsWrite.lua's ARGV[12..27]: the transcript's and its usage's arguments ('' where there are none). */
function transcriptArgs(t: TranscriptWrite | undefined): (string | number)[] {
  const args: (string | number)[] = [...(t?.args ?? [])];
  while (args.length < TRANSCRIPT_ARGS) args.push('');
  return args;
}
