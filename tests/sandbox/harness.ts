// Shared by tests/sandbox/*.int.test.ts: a config file whose roles run code (padded to the 3
// roles deepq needs), and a look at host processes (sandboxed pids are visible from the host).
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from '../../testing/temp-dir.ts';

export interface TestRole {
  name: string;
  tools: string[];
  sandbox?: Record<string, unknown>;
  maxTurns?: number;
}

/** A config file (JSON) with these roles; each role's prompt names it: "You are the sandbox test agent <name>." */
export function writeSandboxConfig(roles: TestRole[]): string {
  const all = [...roles];
  for (let i = 0; all.length < 3; i++) all.push({ name: `idle-${i}`, tools: [] });
  const cfg = {
    roles: all.map((r) => ({
      name: r.name,
      systemPrompt: `You are the sandbox test agent ${r.name}.`,
      tools: r.tools,
      middleware: ['logging', 'tokens', 'tier-routing', 'retry'],
      tier: 'LOW',
      maxTurns: r.maxTurns ?? 12,
      contract: 'text',
      ...(r.sandbox ? { sandbox: r.sandbox } : {}),
    })),
  };
  const file = join(tempDir('deepq-sandbox-cfg-'), 'deepq.json');
  writeFileSync(file, JSON.stringify(cfg, null, 2));
  return file;
}

/** Host pids whose command line holds `marker`. */
export function processesWith(marker: string): number[] {
  const out: number[] = [];
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      if (readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(marker)) out.push(Number(pid));
    } catch {
      /* gone meanwhile */
    }
  }
  return out;
}

export { until } from '../../testing/until.ts';

export const marker = (what: string) => `${what}${Math.random().toString(36).slice(2, 10)}`;
