// `deepq artifacts <goalId> --out DIR`: every artifact written under DIR, all or nothing.
//
// Names are normalised (posix) first, and the whole set is checked before anything is
// written: two names for one path (`b/c.md`, `b//c.md`, `b/./c.md`), a name that is a file
// where another needs a directory (`report` and `report/z.md`), or an existing file or
// directory in DIR of the wrong kind, or a symbolic link (or a path resolving outside DIR)
// where a file needs a directory, refuse the export naming them. Then every file is
// written into a temporary directory and moved into place: one rename when DIR is new, one
// rename per file when it exists. A failure removes the temporary directory: DIR never
// holds a half-written file.
import { randomBytes } from 'node:crypto';
import { lstat, mkdir, mkdtemp, readlink, realpath, rename, rm, stat, writeFile } from 'node:fs/promises';
import { basename, dirname, join, posix, resolve, sep } from 'node:path';
import { ValidationError } from '../../shared/errors.ts';
import { artifactNameProblem } from '../../shared/vfs/artifact-name.ts';
import { safeLine } from '../terminal.ts';

/** Where an artifact goes: its name, and its normalised path relative to DIR. */
export interface Placement {
  name: string;
  rel: string;
}

export interface ExportPlan {
  placements: Placement[];
  /** Names that could escape DIR (never stored by deepq's own writes): skipped. */
  skipped: { name: string; problem: string }[];
  /** Collisions within the set: each one line naming the artifacts. */
  collisions: string[];
}

/** What an export wrote: each artifact's path relative to DIR and its size. */
export interface Written extends Placement {
  bytes: number;
}

const quote = (name: string) => JSON.stringify(name);

function listNames(names: string[]): string {
  const q = names.map(quote);
  return q.length <= 2 ? q.join(' and ') : `${q.slice(0, -1).join(', ')} and ${q[q.length - 1]}`;
}

/** Every directory a relative path needs: `a/b/c.md` → `a`, `a/b`. */
function ancestors(rel: string): string[] {
  const parts = rel.split('/');
  return parts.slice(0, -1).map((_, i) => parts.slice(0, i + 1).join('/'));
}

/** Normalises every name and finds the collisions within the set; touches no filesystem. */
export function planExport(names: string[]): ExportPlan {
  const placements: Placement[] = [];
  const skipped: ExportPlan['skipped'] = [];
  for (const name of names) {
    const rel = posix.normalize(name).replace(/\/+$/, '');
    const problem =
      artifactNameProblem(name) ?? (rel === '' || rel === '.' || rel.startsWith('..') ? 'not a file path' : null);
    if (problem) skipped.push({ name, problem });
    else placements.push({ name, rel });
  }
  const byRel = new Map<string, string[]>();
  for (const p of placements) byRel.set(p.rel, [...(byRel.get(p.rel) ?? []), p.name]);
  const collisions: string[] = [];
  for (const [rel, same] of byRel) {
    if (same.length > 1) collisions.push(`${listNames(same)} would all be written to ${rel}`);
  }
  for (const p of placements) {
    const file = ancestors(p.rel).find((dir) => byRel.has(dir));
    if (file === undefined) continue;
    const fileNames = listNames(byRel.get(file)!);
    collisions.push(`${fileNames} is a file but ${quote(p.name)} needs ${file}/ to be a directory`);
  }
  return { placements, skipped, collisions };
}

type Kind = 'file' | 'dir' | 'link' | 'absent';

/** What is at `path`; a symbolic link is itself ('link') unless `follow` (DIR itself may be one). */
async function kindOf(path: string, follow = false): Promise<Kind> {
  try {
    const st = follow ? await stat(path) : await lstat(path);
    return st.isSymbolicLink() ? 'link' : st.isDirectory() ? 'dir' : 'file';
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    // ENOTDIR: a parent is a file; that parent is reported, not this path.
    if (code === 'ENOENT' || code === 'ENOTDIR') return 'absent';
    throw err;
  }
}

/** What in an existing DIR the export would clobber in a way it must not; one line each. */
export async function conflictsInDir(out: string, placements: Placement[]): Promise<string[]> {
  const root = resolve(out);
  const rootKind = await kindOf(root, true).catch((err: NodeJS.ErrnoException) => err);
  if (rootKind instanceof Error) return [`${out} cannot be used: ${unusableWhy(rootKind)}`];
  if (rootKind === 'file') return [`${out} exists and is not a directory`];
  if (rootKind === 'absent') return fileAncestor(out, root);
  const realRoot = await realpath(root);
  const kinds = new Map<string, Kind>();
  const kind = async (rel: string) => {
    const k = kinds.get(rel) ?? (await kindOf(join(root, rel)));
    kinds.set(rel, k);
    return k;
  };
  const problems: string[] = [];
  for (const p of placements) {
    let problem: string | undefined;
    for (const dir of ancestors(p.rel)) {
      problem = await ancestorProblem(out, dir, await kind(dir), p.name, realRoot);
      if (problem) break;
    }
    if (!problem && (await kind(p.rel)) === 'dir') {
      problem = `${join(out, p.rel)} is a directory and ${quote(p.name)} would replace it`;
    }
    if (problem) problems.push(problem);
  }
  return problems;
}

const UNUSABLE: Record<string, string> = {
  ELOOP: 'a symbolic link that loops',
  EACCES: 'permission denied',
  ENAMETOOLONG: 'its name is too long',
};
const unusableWhy = (err: NodeJS.ErrnoException) => UNUSABLE[err.code ?? ''] ?? err.code ?? err.message;

/** A new DIR under a file (`--out notes.txt/sub`) cannot be made: the file is named. */
async function fileAncestor(out: string, root: string): Promise<string[]> {
  for (let d = dirname(root); d !== dirname(d); d = dirname(d)) {
    const kind = await kindOf(d, true).catch(() => 'unknown');
    if (kind === 'absent') continue;
    return kind === 'file' ? [`${d} is a file, not a directory: ${out} cannot be made in it`] : [];
  }
  return [];
}

/**
 * Why a directory `dir` inside DIR cannot take `name`: a file there, or a symbolic link (a
 * model-chosen `docs/index.html` must not land wherever `DIR/docs` points), or a path that
 * resolves outside DIR. A link in the file's own place is fine: the rename replaces the link.
 */
async function ancestorProblem(out: string, dir: string, kind: Kind, name: string, realRoot: string) {
  const at = join(out, dir);
  if (kind === 'file') return `${at} is a file but ${quote(name)} needs it to be a directory`;
  if (kind === 'link') {
    const target = await readlink(join(resolve(out), dir)).catch(() => '?');
    return `${at} is a symbolic link (to ${target}): ${quote(name)} would be written through it`;
  }
  if (kind !== 'dir') return undefined;
  const real = await realpath(join(resolve(out), dir));
  if (real !== realRoot && !real.startsWith(`${realRoot}${sep}`))
    return `${at} resolves to ${real}, outside ${out}: ${quote(name)} would be written there`;
  return undefined;
}

/** One line for a list of problems: the first few, and how many more. */
export function refusal(out: string, problems: string[]): ValidationError {
  const shown = problems.slice(0, 3).join('; ');
  const more = problems.length > 3 ? ` (and ${problems.length - 3} more)` : '';
  return new ValidationError(safeLine(`refusing to write artifacts to ${out}, nothing written: ${shown}${more}`));
}

/**
 * Checks, then writes every placement's content (from `read`) under `out`, all or nothing.
 * Throws a ValidationError naming the problem, with nothing written, on any collision.
 */
export async function exportArtifacts(
  out: string,
  plan: ExportPlan,
  read: (name: string) => Promise<string | null>,
): Promise<Written[]> {
  const problems = [...plan.collisions, ...(await conflictsInDir(out, plan.placements))];
  if (problems.length) throw refusal(out, problems);
  const root = resolve(out);
  const existed = (await kindOf(root, true)) === 'dir';
  // A new DIR is built beside it and renamed into place; an existing one gets the temporary
  // directory inside it (same filesystem, no need to write its parent). Its name starts with
  // a dot, which no artifact name can.
  const made = existed ? undefined : await makeParents(out, dirname(root));
  const tmp = existed ? await mkdtemp(join(root, '.deepq-artifacts-')) : await newDirBeside(root);
  let moved = false;
  try {
    const written = await writeAll(out, tmp, plan.placements, read);
    if (existed) await moveEach(out, tmp, written);
    else await rename(tmp, root).catch((err: Error) => Promise.reject(moveError(out, err)));
    moved = !existed;
    return written;
  } finally {
    if (!moved) await rm(tmp, { recursive: true, force: true });
    // Parent directories created for a DIR that never came to be.
    if (made && !moved) await rm(made, { recursive: true, force: true });
  }
}

/**
 * `mkdir -p dir` for a new DIR's parent, one component at a time from the nearest existing
 * ancestor. Not `mkdir(dir, { recursive: true })`: Node 20's spins for ever when mkdir fails
 * with ENOENT for another reason than a missing parent (under /proc, say). A failure names the
 * directory and why, and removes what this made; returns the first directory made, if any.
 */
async function makeParents(out: string, dir: string): Promise<string | undefined> {
  const missing: string[] = [];
  // A stat that fails otherwise (EACCES) stops the walk: the mkdir below then says why.
  for (let d = dir; d !== dirname(d); d = dirname(d)) {
    if ((await kindOf(d, true).catch(() => 'unknown')) !== 'absent') break;
    missing.unshift(d);
  }
  let first: string | undefined;
  for (const d of missing) {
    try {
      await mkdir(d);
      first ??= d;
    } catch (err) {
      // Made meanwhile by someone else: fine if it is a directory.
      if ((err as NodeJS.ErrnoException).code === 'EEXIST' && (await kindOf(d, true)) === 'dir') continue;
      if (first) await rm(first, { recursive: true, force: true });
      const why = (err as Error).message;
      throw new ValidationError(safeLine(`could not create the directory ${d} for ${out}, nothing written: ${why}`));
    }
  }
  return first;
}

/**
 * The directory that becomes a new DIR: made with mkdir, so its mode is the usual one (0777 less
 * the umask), as its subdirectories' are; mkdtemp's 0700 would stay on DIR after the rename.
 */
async function newDirBeside(root: string): Promise<string> {
  for (;;) {
    const tmp = join(dirname(root), `.${basename(root)}.tmp-${randomBytes(6).toString('hex')}`);
    try {
      await mkdir(tmp);
      return tmp;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
}

async function writeAll(
  out: string,
  tmp: string,
  placements: Placement[],
  read: (name: string) => Promise<string | null>,
): Promise<Written[]> {
  const written: Written[] = [];
  for (const p of placements) {
    const content = await read(p.name);
    if (content === null) {
      throw new ValidationError(
        safeLine(`artifact ${quote(p.name)} is gone (evicted or swept while exporting); nothing written to ${out}`),
      );
    }
    const path = join(tmp, p.rel);
    try {
      await mkdir(dirname(path), { recursive: true });
      // Exclusive: on a case-insensitive filesystem `A.md` and `a.md` are one file.
      await writeFile(path, content, { flag: 'wx' });
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== 'EEXIST' && code !== 'EISDIR' && code !== 'ENOTDIR') throw err;
      const others = written.filter((w) => w.rel.toLowerCase() === p.rel.toLowerCase()).map((w) => w.name);
      const what = others.length ? `collides with ${listNames(others)}` : 'collides with another artifact';
      throw refusal(out, [`${quote(p.name)} ${what} on this filesystem (are names case-insensitive here?)`]);
    }
    written.push({ ...p, bytes: Buffer.byteLength(content, 'utf8') });
  }
  return written;
}

/** Into an existing DIR: every directory first, then one rename per file (each atomic). */
async function moveEach(out: string, tmp: string, written: Written[]): Promise<void> {
  const root = resolve(out);
  let done = 0;
  try {
    for (const dir of new Set(written.map((w) => dirname(join(root, w.rel))))) await mkdir(dir, { recursive: true });
    for (const w of written) {
      await rename(join(tmp, w.rel), join(root, w.rel));
      done++;
    }
  } catch (err) {
    // Each file moved is complete; none is ever half-written.
    const progress = `stopped after ${done} of ${written.length} files`;
    throw new ValidationError(safeLine(`writing artifacts to ${out} ${progress}: ${(err as Error).message}`));
  }
}

function moveError(out: string, err: Error): ValidationError {
  return new ValidationError(safeLine(`could not move the artifacts into ${out}: ${err.message}`));
}
