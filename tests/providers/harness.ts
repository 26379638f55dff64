// Shared by the provider tests that run real service processes: a config file naming the
// local Chat Completions server as a provider, and reading /metrics.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DEFAULT_ROLES } from '../../shared/agent/roles.ts';
import { tempDir } from '../../testing/temp-dir.ts';

/** Writes a JSON config file and returns its path (for DEEPQ_CONFIG). */
export function writeConfig(content: Record<string, unknown>): string {
  const file = join(tempDir('deepq-providers-'), 'deepq.json');
  writeFileSync(file, JSON.stringify(content, null, 2));
  return file;
}

/** The default roles, some with their own model. */
export function rolesWithModels(models: Record<string, string>): unknown[] {
  return DEFAULT_ROLES.map((r) => (models[r.name] ? { ...r, model: models[r.name] } : r));
}

export async function scrape(port: number | undefined): Promise<string> {
  return (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
}

/** The value of the first series of `name` carrying all `labels`, or NaN. */
export function sample(body: string, name: string, labels: Record<string, string>): number {
  const lines = body.split('\n').filter((l) => l.startsWith(`${name}{`));
  const hit = lines.find((l) => Object.entries(labels).every(([k, v]) => l.includes(`${k}="${v}"`)));
  return hit ? Number(hit.split(' ').pop()) : Number.NaN;
}

/** Every `model` label value of a metric in a scrape. */
export function modelLabels(body: string, name: string): string[] {
  const values = body
    .split('\n')
    .filter((l) => l.startsWith(`${name}{`))
    .map((l) => /model="([^"]*)"/.exec(l)?.[1] ?? '');
  return [...new Set(values)].sort();
}
