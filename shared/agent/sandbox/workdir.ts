// The throwaway work dir of one run: made private to the sandbox uid, filled with copies of
// artifacts, measured while the run goes, read back without ever following what the program
// left there (symlinks, FIFOs, swapped directories), and removed.

import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { constants, type Dirent } from 'node:fs';
import { chmod, chown, lstat, mkdir, mkdtemp, open, opendir, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, relative, sep } from 'node:path';

/**
 * A walk of the work dir stops here, folders counted: a program that makes a million files or
 * folders must not stall the worker (and the files limit kills the run at it). There is no
 * depth limit of its own: the cap bounds a chain of folders too, and past the host's PATH_MAX
 * the walk cannot read on (a depth limit of 32 killed ordinary `mkdir -p` trees as over the limit).
 */
export const WALK_MAX_ENTRIES = 5000;

export interface WorkDir {
  path: string;
  /** Who owns what is put there: the sandbox uid for a root worker, else nobody changes. */
  owner: { uid: number; gid: number } | null;
}

/** A fresh private dir (0700) under the host's tmpdir, owned by the sandbox uid when given. */
export async function createWorkDir(owner: WorkDir['owner'], base = tmpdir()): Promise<WorkDir> {
  const path = await mkdtemp(join(base, 'deepq-run-'));
  if (owner) await chown(path, owner.uid, owner.gid);
  await chmod(path, 0o700);
  return { path, owner };
}

/** Writes `content` at `name` (an artifact name: no "..", no leading "/"), creating its folders. */
export async function putFile(wd: WorkDir, name: string, content: string | Buffer): Promise<void> {
  const file = join(wd.path, name);
  const parts = relative(wd.path, dirname(file)).split(sep).filter(Boolean);
  let dir = wd.path;
  for (const p of parts) {
    dir = join(dir, p);
    await mkdir(dir).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'EEXIST') throw err;
    });
    if (wd.owner) await chown(dir, wd.owner.uid, wd.owner.gid);
  }
  await writeFile(file, content, { mode: 0o644, flag: 'wx' });
  if (wd.owner) await chown(file, wd.owner.uid, wd.owner.gid);
}

export interface WalkEntry {
  name: string;
  kind: 'file' | 'symlink' | 'other';
  bytes: number;
  /** What it takes for the files limit (diskBytes; 0 but for a regular file). */
  disk: number;
}

export interface Walk {
  /** The non-directories, by relative name. */
  entries: WalkEntry[];
  /** Bytes of the regular files and of the folders (a folder of many names takes disk too). */
  bytes: number;
  /** The walk stopped at WALK_MAX_ENTRIES, or met a folder it cannot read (or past PATH_MAX). */
  truncated: boolean;
  /** The folders visited, by relative name, in the order met. */
  dirs: string[];
}

function kindOf(d: Dirent): WalkEntry['kind'] | 'dir' {
  if (d.isDirectory()) return 'dir';
  if (d.isFile()) return 'file';
  return d.isSymbolicLink() ? 'symlink' : 'other';
}

/**
 * A folder or file the walk could not measure: one the program made unreadable to the worker
 * (chmod 0300: the run shares the worker's uid when the worker is not root), or one whose path
 * is past PATH_MAX (folders nested deep enough). The walk is incomplete then, which the files
 * limit treats as over it: unread, its bytes counted as none, and deep folders filled the disk.
 * Only a name removed meanwhile (ENOENT) is nothing.
 */
function unmeasured(err: unknown, out: Walk): void {
  if ((err as NodeJS.ErrnoException).code !== 'ENOENT') out.truncated = true;
}

/** At most `max` names of a folder, in name order: a folder of 150,000 names is not read in full (nor sorted). */
async function listDir(dir: string, max: number, out: Walk): Promise<Dirent[]> {
  const list: Dirent[] = [];
  try {
    // Leaving the loop early closes the folder.
    for await (const d of await opendir(dir, { bufferSize: 256 })) {
      list.push(d);
      if (list.length >= max) break;
    }
  } catch (err) {
    unmeasured(err, out);
  }
  return list.sort((a, b) => a.name.localeCompare(b.name));
}

/** A file's size, and what it takes on disk (for the files limit). */
const sizesOf = (path: string, out: Walk) =>
  lstat(path).then(
    (s) => ({ size: s.size, disk: diskBytes(s) }),
    (err: unknown) => {
      unmeasured(err, out);
      return { size: 0, disk: 0 };
    },
  );

/**
 * What a file takes for the files limit: its size, or the blocks it holds past its last one when
 * more (fallocate with KEEP_SIZE reserves disk, or tmpfs memory, that its size never shows and
 * RLIMIT_FSIZE does not stop). A small file's one partly used block does not count.
 */
export const diskBytes = (s: { size: number; blocks: number }) => Math.max(s.size, s.blocks * 512 - 4096);

/**
 * Every non-directory under the work dir, by relative name, never following a symlink. Folders
 * count as entries and bytes too: a run making only empty folders is stopped at the cap, and
 * the walk never visits more than `maxEntries` names.
 */
export async function walkWorkDir(root: string, maxEntries = WALK_MAX_ENTRIES): Promise<Walk> {
  const out: Walk = { entries: [], bytes: 0, truncated: false, dirs: [] };
  let seen = 0;
  const visit = async (dir: string): Promise<void> => {
    // One more than is left: a folder holding more than that is past the cap.
    for (const d of await listDir(dir, maxEntries - seen + 1, out)) {
      if (seen >= maxEntries) {
        out.truncated = true;
        return;
      }
      seen++;
      const path = join(dir, d.name);
      const kind = kindOf(d);
      const { size: bytes, disk } = kind === 'file' || kind === 'dir' ? await sizesOf(path, out) : { size: 0, disk: 0 };
      out.bytes += disk;
      if (kind !== 'dir') out.entries.push({ name: relative(root, path), kind, bytes, disk });
      else {
        out.dirs.push(relative(root, path));
        await visit(path);
      }
    }
  };
  await visit(root);
  return out;
}

export const sha256 = (b: string | Buffer) => createHash('sha256').update(b).digest('hex');

/**
 * Reads a file the program may have written, refusing anything but a regular file that is
 * really inside the work dir: each folder on the way must be a folder (a symlink in its place
 * fails), and the last component is opened without following a symlink. No realpath: under
 * bubblewrap `root` is /proc/<pid>/root/work, which a realpath turns into a host path, and where
 * an absolute symlink would lead to the host's files. The program no longer runs (nothing swaps
 * a folder between the check and the open).
 */
export async function readRegularFile(root: string, name: string, maxBytes: number): Promise<Buffer> {
  const parts = name.split('/');
  let realDir = root;
  for (const part of parts.slice(0, -1)) {
    realDir = join(realDir, part);
    const st = await lstat(realDir).catch(() => null);
    if (st === null) throw new Error(`${name}: no such file in the work dir`);
    if (!st.isDirectory()) throw new Error(`${name}: its folder leads outside the work dir`);
  }
  const flags = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;
  const fh = await open(join(realDir, parts.at(-1)!), flags).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ELOOP') throw new Error(`${name} is a symlink: only regular files are saved`);
    if (err.code === 'ENOENT') throw new Error(`${name}: no such file in the work dir`);
    throw new Error(`${name}: ${err.code ?? err.message}`);
  });
  try {
    const st = await fh.stat();
    if (!st.isFile()) throw new Error(`${name} is not a regular file`);
    if (st.size > maxBytes) throw new Error(`${name} is ${st.size} bytes (max ${maxBytes})`);
    const buf = Buffer.alloc(st.size);
    const { bytesRead } = await fh.read(buf, 0, st.size, 0);
    return buf.subarray(0, bytesRead);
  } finally {
    await fh.close();
  }
}

/** `rm -rf` in a child process: node's recursive rm stalls the event loop (0.7 s on 20,000 folders, 10 on 150,000). */
function rmRf(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const child = spawn('rm', ['-rf', '--', path], { stdio: 'ignore' });
    child.once('error', () => resolve(false));
    child.once('exit', (code) => resolve(code === 0));
  });
}

/**
 * Removes the work dir, off the event loop; a folder the program made unreadable (mode 000) is
 * opened up first. Without an `rm` to spawn, node's own rm does it.
 */
export async function removeWorkDir(root: string): Promise<void> {
  if (await rmRf(root)) return;
  const open = async (dir: string): Promise<void> => {
    await chmod(dir, 0o700).catch(() => {});
    const list = await readdir(dir, { withFileTypes: true }).catch(() => [] as Dirent[]);
    for (const d of list) if (d.isDirectory()) await open(join(dir, d.name));
  };
  await open(root);
  if (!(await rmRf(root))) await rm(root, { recursive: true, force: true });
}
