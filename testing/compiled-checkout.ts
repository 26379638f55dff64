// A copy of this checkout's sources in a temporary directory (node_modules linked, not copied),
// built with scripts/build.mjs as `npm ci` builds it. Tests of the compiled runtime and the bench
// use it: they must neither depend on nor change the checkout's own dist/.
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
/** What a build needs, and all the CLI runs. */
const SOURCES = [
  'bin',
  'cli',
  'services',
  'shared',
  'scripts/build.mjs',
  'package.json',
  'tsconfig.json',
  'tsconfig.build.json',
];

export interface Checkout {
  root: string;
  /** Its bin/deepq.mjs. */
  bin: string;
  /** `npm run build` there; throws with tsc's output when it fails. */
  build(): void;
  remove(): void;
}

function checkoutAt(root: string, files: string[], from = ROOT): Checkout {
  for (const f of files) {
    mkdirSync(dirname(join(root, f)), { recursive: true });
    cpSync(join(from, f), join(root, f), { recursive: true });
  }
  symlinkSync(join(ROOT, 'node_modules'), join(root, 'node_modules'), 'dir');
  return {
    root,
    bin: join(root, 'bin', 'deepq.mjs'),
    build() {
      execFileSync(process.execPath, [join(root, 'scripts', 'build.mjs')], { cwd: root, stdio: 'pipe' });
    },
    remove() {
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/** The sources, copied (not built: call build()). */
export function sourceCheckout(): Checkout {
  const root = mkdtempSync(join(tmpdir(), 'deepq-checkout-'));
  return checkoutAt(root, SOURCES);
}

/** What the Docker image holds: bin/, dist/ and package.json, no sources; from a built checkout. */
export function imageLayout(built: Checkout): Checkout {
  const root = mkdtempSync(join(tmpdir(), 'deepq-image-'));
  return checkoutAt(root, ['bin', 'dist', 'package.json'], built.root);
}
