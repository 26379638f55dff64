// `enqueue --file`: the files a goal starts with, read from disk and named as artifacts. A file
// inside the current directory keeps its path there (`docs/spec.md`); one outside it, its base
// name. Everything is checked before anything is stored: a refused file names itself and why.
import { readFileSync, statSync } from 'node:fs';
import { basename, isAbsolute, relative, resolve, sep } from 'node:path';
import { ValidationError } from '../shared/errors.ts';
import { artifactNameProblem } from '../shared/vfs/artifact-name.ts';
import { type InputFile, inputSizeProblem, inputText } from './goal-request.ts';

/** The artifact name a path on disk becomes. */
export function inputName(path: string, cwd: string): string {
  const rel = relative(cwd, resolve(cwd, path));
  const inside = rel !== '' && !rel.startsWith('..') && !isAbsolute(rel);
  return inside ? rel.split(sep).join('/') : basename(path);
}

/** Reads each file as UTF-8 text, at most `maxBytes` each (the VFS's DEEPQ_MAX_ARTIFACT_BYTES). */
export function readInputFiles(paths: string[], maxBytes: number, cwd = process.cwd()): InputFile[] {
  const names = new Map<string, string>();
  return paths.map((path) => {
    const refuse = (why: string) => new ValidationError(`--file ${JSON.stringify(path)}: ${why}`);
    // What the path is comes first: `--file .` is a folder, whatever its name would be.
    const full = resolve(cwd, path);
    const size = regularFileSize(full, refuse);
    const name = inputName(path, cwd);
    const problem = artifactNameProblem(name);
    if (problem) throw refuse(`${problem} (rename or copy the file)`);
    const other = names.get(name);
    if (other !== undefined) throw refuse(`named ${name}, as --file ${JSON.stringify(other)} is`);
    names.set(name, path);
    return { name, content: readText(full, size, maxBytes, refuse) };
  });
}

function regularFileSize(path: string, refuse: (why: string) => Error): number {
  try {
    const st = statSync(path);
    if (!st.isFile()) throw refuse(st.isDirectory() ? 'is a folder: name its files' : 'is not a regular file');
    return st.size;
  } catch (err) {
    if (err instanceof ValidationError) throw err;
    throw refuse(`cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
}

function readText(path: string, size: number, maxBytes: number, refuse: (why: string) => Error): string {
  const tooBig = inputSizeProblem(size, maxBytes);
  if (tooBig) throw refuse(tooBig);
  const read = inputText(readFileSync(path));
  if ('problem' in read) throw refuse(read.problem);
  return read.text;
}
