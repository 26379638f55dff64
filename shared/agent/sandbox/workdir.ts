// The throwaway work dir of one run: made private to the sandbox uid, filled with copies of
// artifacts, measured while the run goes, read back without ever following what the program
// left there (symlinks, FIFOs, swapped directories), and removed.
import { createHash } from 'node:crypto';
import { constants, type Dirent } from 'node:fs';
import { chmod, chown, lstat, mkdir, mkdtemp, open, readdir, realpath, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, relative, sep } from 'node:path';

/** A walk of the work dir stops here: a program that makes a million files must not stall the worker. */
export const WALK_MAX_ENTRIES = 5000;
const WALK_MAX_DEPTH = 32;

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
}

export interface Walk {
  entries: WalkEntry[];
  /** Regular-file bytes in all. */
  bytes: number;
  /** The walk stopped at WALK_MAX_ENTRIES or WALK_MAX_DEPTH, or met a folder it cannot read. */
  truncated: boolean;
}

function kindOf(d: Dirent): WalkEntry['kind'] | 'dir' {
  if (d.isDirectory()) return 'dir';
  if (d.isFile()) return 'file';
  return d.isSymbolicLink() ? 'symlink' : 'other';
}

/** Every non-directory under the work dir, by relative name, never following a symlink. */
export async function walkWorkDir(root: string, maxEntries = WALK_MAX_ENTRIES): Promise<Walk> {
  const out: Walk = { entries: [], bytes: 0, truncated: false };
  const visit = async (dir: string, depth: number): Promise<void> => {
    const list = await readdir(dir, { withFileTypes: true }).catch((err: NodeJS.ErrnoException) => {
      // A folder the program made unreadable to the worker (chmod 0300: the run shares the
      // worker's uid when the worker is not root) cannot be measured: the walk is incomplete,
      // which the files limit treats as over it. Unread, its bytes would count as none.
      if (err.code === 'EACCES') out.truncated = true;
      return [] as Dirent[];
    });
    for (const d of list.sort((a, b) => a.name.localeCompare(b.name))) {
      if (out.entries.length >= maxEntries) {
        out.truncated = true;
        return;
      }
      const path = join(dir, d.name);
      const kind = kindOf(d);
      if (kind === 'dir') {
        if (depth >= WALK_MAX_DEPTH) out.truncated = true;
        else await visit(path, depth + 1);
        continue;
      }
      const bytes =
        kind === 'file'
          ? await lstat(path).then(
              (s) => s.size,
              () => 0,
            )
          : 0;
      out.bytes += bytes;
      out.entries.push({ name: relative(root, path), kind, bytes });
    }
  };
  await visit(root, 0);
  return out;
}

export const sha256 = (b: string | Buffer) => createHash('sha256').update(b).digest('hex');

/**
 * Reads a file the program may have written, refusing anything but a regular file that is
 * really inside the work dir: the last component is opened without following a symlink, and
 * the folder it is in must resolve inside the work dir (a folder swapped for a symlink fails).
 */
export async function readRegularFile(root: string, name: string, maxBytes: number): Promise<Buffer> {
  const file = join(root, name);
  const realRoot = await realpath(root);
  const realDir = await realpath(dirname(file)).catch(() => null);
  if (realDir === null) throw new Error(`${name}: no such file in the work dir`);
  if (realDir !== realRoot && !realDir.startsWith(realRoot + sep)) {
    throw new Error(`${name}: its folder leads outside the work dir`);
  }
  const flags = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;
  const fh = await open(join(realDir, name.split('/').pop()!), flags).catch((err: NodeJS.ErrnoException) => {
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

/** Removes the work dir; a folder the program made unreadable (mode 000) is opened up first. */
export async function removeWorkDir(root: string): Promise<void> {
  try {
    await rm(root, { recursive: true, force: true });
  } catch {
    const open = async (dir: string): Promise<void> => {
      await chmod(dir, 0o700).catch(() => {});
      const list = await readdir(dir, { withFileTypes: true }).catch(() => [] as Dirent[]);
      for (const d of list) if (d.isDirectory()) await open(join(dir, d.name));
    };
    await open(root);
    await rm(root, { recursive: true, force: true });
  }
}
