// Artifact names: the one rule for what a name may be, checked before any key or path is built.
import { z } from 'zod';

/** A safe character set, ≤ 200 chars, no `..`, no leading `/`, no control chars, no hidden segment. */
export const ARTIFACT_NAME_RE = /^[A-Za-z0-9_][A-Za-z0-9_.\-/]{0,199}$/;
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
const CONTROL_CHARS = /[\u0000-\u001f\u007f]/;

export function artifactNameProblem(name: unknown): string | null {
  if (typeof name !== 'string') return 'artifact name must be a string';
  if (name.length === 0) return 'artifact name is empty';
  if (name.length > 200) return `artifact name is ${name.length} chars (max 200)`;
  if (CONTROL_CHARS.test(name)) return 'artifact name contains control characters';
  if (name.startsWith('/')) return `artifact name ${JSON.stringify(name)} starts with "/"`;
  if (name.includes('..')) return `artifact name ${JSON.stringify(name)} contains ".."`;
  if (!ARTIFACT_NAME_RE.test(name)) {
    return `artifact name ${JSON.stringify(name)} has characters outside [A-Za-z0-9_.-/]`;
  }
  // A file's path as `artifacts --out` writes it: `a/` or `a//b` would be no file, or the same one twice.
  if (name.endsWith('/')) return `artifact name ${JSON.stringify(name)} ends with "/": name a file, not a folder`;
  const parts = name.split('/');
  if (parts.some((part) => part === '' || part === '.'))
    return `artifact name ${JSON.stringify(name)} has an empty or "." path segment`;
  // A hidden folder is config another program obeys on the user's machine: `report/.git/config`
  // written by `artifacts --out` makes the next `git status` there run a command the model chose.
  const hidden = parts.find((part) => part.startsWith('.'));
  if (hidden !== undefined) {
    const which = JSON.stringify(hidden);
    return `artifact name ${JSON.stringify(name)} has a hidden path segment (${which}): no part may start with "."`;
  }
  return null;
}

export const ArtifactNameSchema = z.string().superRefine((name, ctx) => {
  const problem = artifactNameProblem(name);
  if (problem) ctx.addIssue({ code: 'custom', message: problem });
});
