// The default roles' tools: what each role may do, the same in the built-in defaults and in
// the config file both deployments mount (k8s/base/deepq.yaml), and nothing that dispatches.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { parse } from 'yaml';
import { DEFAULT_ROLES, TOOL_NAMES } from '../../shared/agent/roles.ts';
import { ConfigSchema } from '../../shared/runtime/config.ts';

const ROOT = join(import.meta.dirname, '..', '..');

test('each default role has the tools that suit it', () => {
  const tools = Object.fromEntries(DEFAULT_ROLES.map((r) => [r.name, r.tools]));
  assert.deepEqual(tools, {
    'research-specialist': ['read_file', 'list_files', 'grep'],
    'code-writer': ['read_file', 'list_files', 'write_file', 'edit_file', 'grep'],
    critic: ['read_file', 'list_files', 'grep'],
  });
  for (const r of DEFAULT_ROLES) {
    for (const t of r.tools ?? []) assert.ok((TOOL_NAMES as readonly string[]).includes(t), `${r.name}: ${t}`);
  }
});

test("k8s/base/deepq.yaml's roles have the defaults' tools, in the same order", () => {
  const file = ConfigSchema.parse(parse(readFileSync(join(ROOT, 'k8s/base/deepq.yaml'), 'utf8')));
  const defaults = ConfigSchema.parse({});
  assert.deepEqual(
    file.roles.map((r) => [r.name, r.tools]),
    defaults.roles.map((r) => [r.name, r.tools]),
  );
});
