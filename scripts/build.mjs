#!/usr/bin/env node
// `npm run build`: compiles cli/, services/ and shared/ to dist/ with tsc (tsconfig.build.json),
// copies the files they read at run time beside them (Lua scripts, the inspector's static files),
// and writes the build stamp last (bin/build-stamp.mjs). The build goes to a temporary directory
// that replaces dist/ when complete: a CLI starting meanwhile never sees half a build.
//
// `--if-possible` (the `prepare` script, run by `npm ci`): with no TypeScript installed
// (`npm ci --omit=dev`), no sources, or a failed compile, it says so and exits 0; the CLI then
// runs the sources through tsx.
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SOURCE_DIRS, STAMP_FILE, snapshot, stampContent } from '../bin/build-stamp.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const ifPossible = process.argv.includes('--if-possible');
const out = join(root, 'dist');
const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');

function skip(why) {
  process.stderr.write(`deepq build: not built, ${why}; the CLI runs the sources through tsx\n`);
  process.exit(ifPossible ? 0 : 1);
}

if (!existsSync(join(root, 'cli', 'main.ts'))) skip('no sources here');
if (!existsSync(tsc)) skip('TypeScript is not installed (npm ci --omit=dev?)');

// Taken before compiling: a source edited during the build no longer matches the stamp.
const sources = snapshot(root);
const tmp = join(root, `dist.tmp-${process.pid}`);
rmSync(tmp, { recursive: true, force: true });
try {
  execFileSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json'), '--outDir', tmp], {
    cwd: root,
    stdio: 'inherit',
  });
} catch {
  rmSync(tmp, { recursive: true, force: true });
  skip('tsc failed');
}
const runtimeFiles = Object.keys(sources).filter((f) => SOURCE_DIRS.includes(f.split('/')[0]) && !f.endsWith('.ts'));
for (const f of runtimeFiles) {
  mkdirSync(dirname(join(tmp, f)), { recursive: true });
  copyFileSync(join(root, f), join(tmp, f));
}
writeFileSync(join(tmp, STAMP_FILE), stampContent(sources));
const old = join(root, `dist.old-${process.pid}`);
if (existsSync(out)) renameSync(out, old);
renameSync(tmp, out);
rmSync(old, { recursive: true, force: true });
process.stderr.write(`deepq build: dist/ (${Object.keys(sources).length} sources, ${runtimeFiles.length} copied)\n`);
