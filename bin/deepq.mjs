#!/usr/bin/env node
// The deepq CLI. Runs the compiled JavaScript in dist/ when it was built from exactly these sources
// (bin/build-stamp.mjs), else the TypeScript sources through tsx: never stale output. An image
// without the sources (the Dockerfile's) runs dist/. DEEPQ_DEBUG says which and why.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { STAMP_FILE, staleReason } from './build-stamp.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const dist = new URL('../dist/', import.meta.url);
const say = (s) => process.env.DEEPQ_DEBUG && process.stderr.write(`deepq: ${s}\n`);

/** null: run dist/; else why the sources run instead. */
function whySources() {
  if (!existsSync(new URL('../cli/main.ts', import.meta.url))) return null;
  if (process.env.DEEPQ_FROM_SOURCE) return 'DEEPQ_FROM_SOURCE is set';
  return staleReason(root, fileURLToPath(dist));
}

const why = whySources();
if (why === null) {
  if (!existsSync(new URL(STAMP_FILE, dist))) {
    process.stderr.write('deepq: neither the sources nor a complete build in dist/ are here\n');
    process.exit(1);
  }
  say('running the build in dist/');
  await import(new URL('cli/main.js', dist).href);
} else {
  say(`running the sources through tsx: ${why} (npm run build compiles them)`);
  const { register } = await import('tsx/esm/api');
  register();
  await import('../cli/main.ts');
}
