// `node --import ./testing/import-trace.mjs …` appends the URL of every module the process loads
// (through the ESM loader: packages' entry points, all ES modules) to the file named by
// DEEPQ_IMPORT_TRACE, one per line. Tests use it to prove what a command does not load.
import { register } from 'node:module';

// The hooks run on the loader thread; a data: URL keeps them in this one file.
const hooks = `
import { appendFileSync } from 'node:fs';
const out = process.env.DEEPQ_IMPORT_TRACE;
export async function load(url, context, next) {
  if (out) appendFileSync(out, url + '\\n');
  return next(url, context);
}`;
register(`data:text/javascript,${encodeURIComponent(hooks)}`);
