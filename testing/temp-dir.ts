// Temporary folders for tests, removed when the test process exits: a suite run makes hundreds
// (blob stores, config files, work dirs), and /tmp is shared by every run on the machine.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const made: string[] = [];

/** A new empty folder under the system temp dir, named `<prefix>XXXXXX`. */
export function tempDir(prefix: string): string {
  if (!made.length) {
    process.once('exit', () => {
      for (const dir of made) rmSync(dir, { recursive: true, force: true });
    });
  }
  const dir = mkdtempSync(join(tmpdir(), prefix));
  made.push(dir);
  return dir;
}
