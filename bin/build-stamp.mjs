// The build stamp: which sources dist/ was compiled from. scripts/build.mjs writes it last, after a
// complete build; bin/deepq.mjs runs dist/ only while every source still matches it, so an edit, a
// checkout, a new or a deleted file makes the CLI run the sources instead of stale output.
// Matching is by path, size and mtime: a stat per file and no reads, as it runs on every start.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

/** Everything the build compiles or copies into dist/, and what decides how it compiles. */
export const SOURCE_DIRS = ['cli', 'services', 'shared'];
export const SOURCE_FILES = ['tsconfig.json', 'tsconfig.build.json', 'scripts/build.mjs'];
export const STAMP_FILE = 'build-stamp.json';
const STAMP_VERSION = 1;

/** Adds `rel → "size:mtimeMs"` for every file under `rel` (dot files skipped: editor litter). */
function walk(root, rel, into) {
  for (const e of readdirSync(join(root, rel), { withFileTypes: true })) {
    if (e.name.startsWith('.')) continue;
    const path = `${rel}/${e.name}`;
    if (e.isDirectory()) walk(root, path, into);
    else into[path] = fingerprint(join(root, path));
  }
}

function fingerprint(file) {
  const s = statSync(file);
  return `${s.size}:${s.mtimeMs}`;
}

/** The sources of the checkout at `root` as the stamp records them. */
export function snapshot(root) {
  const files = {};
  for (const dir of SOURCE_DIRS) walk(root, dir, files);
  for (const f of SOURCE_FILES) files[f] = fingerprint(join(root, f));
  return files;
}

export function stampContent(sources) {
  return `${JSON.stringify({ version: STAMP_VERSION, builtAt: new Date().toISOString(), sources })}\n`;
}

/**
 * Why the build in `dist` cannot be used for the sources at `root`, or null when it can: no
 * stamp (never built, or a build that did not finish), or the first source that differs.
 */
export function staleReason(root, dist) {
  let stamp;
  try {
    stamp = JSON.parse(readFileSync(join(dist, STAMP_FILE), 'utf8'));
  } catch {
    return 'there is no complete build';
  }
  if (stamp.version !== STAMP_VERSION) return 'the build stamp is of another version';
  let now;
  try {
    now = snapshot(root);
  } catch (err) {
    return `a source cannot be read (${err.code ?? err.message})`;
  }
  for (const [file, print] of Object.entries(now)) {
    if (stamp.sources[file] === undefined) return `${file} is new since the build`;
    if (stamp.sources[file] !== print) return `${file} changed since the build`;
  }
  for (const file of Object.keys(stamp.sources)) if (!(file in now)) return `${file} was removed since the build`;
  return null;
}
