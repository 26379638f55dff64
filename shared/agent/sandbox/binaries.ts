// Where the sandbox's host programs are: looked up on the worker's PATH (so an operator, or a
// test, controls which bwrap runs, and a PATH without it reads as "not installed").
import { execFileSync } from 'node:child_process';
import { accessSync, constants, realpathSync, statSync } from 'node:fs';
import { delimiter, isAbsolute, join } from 'node:path';

/** The absolute path of `name` on `path` (a PATH value), or null when no executable file has it. */
export function findExecutable(name: string, path: string | undefined): string | null {
  for (const dir of (path ?? '').split(delimiter)) {
    // A relative PATH entry would depend on the worker's cwd: never trusted.
    if (!dir || !isAbsolute(dir)) continue;
    const file = join(dir, name);
    try {
      if (!statSync(file).isFile()) continue;
      accessSync(file, constants.X_OK);
      return file;
    } catch {
      /* not here */
    }
  }
  return null;
}

export interface SandboxBinaries {
  /** bubblewrap; null when it is not on PATH (fatal only in `bwrap` mode). */
  bwrap: string | null;
  /** util-linux's prlimit: sets the limits in both modes. */
  prlimit: string | null;
  /** bwrap knows --disable-userns (0.8.0 and later; Ubuntu 22.04 ships 0.6). */
  disableUserns?: boolean;
}

const helpOf = new Map<string, string>();

/** Whether this bwrap can forbid nested user namespaces: asked once per binary, from its --help. */
function knowsDisableUserns(bwrap: string): boolean {
  let help = helpOf.get(bwrap);
  if (help === undefined) {
    try {
      help = execFileSync(bwrap, ['--help'], { encoding: 'utf8', env: {}, timeout: 5000 });
    } catch (err) {
      help = String((err as { stdout?: string }).stdout ?? '');
    }
    helpOf.set(bwrap, help);
  }
  return help.includes('--disable-userns');
}

/** bwrap and prlimit on `path`, symlinks resolved (prlimit runs inside the sandbox by that path). */
export function findSandboxBinaries(path = process.env.PATH): SandboxBinaries {
  const find = (name: string) => {
    const file = findExecutable(name, path);
    return file && realpathSync(file);
  };
  const bwrap = find('bwrap');
  return { bwrap, prlimit: find('prlimit'), disableUserns: bwrap !== null && knowsDisableUserns(bwrap) };
}
