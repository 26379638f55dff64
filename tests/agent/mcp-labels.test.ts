// The `tool` label of an MCP tool `mcp:<server>/*` picked is bounded: the names are the server's,
// which may list names of any length or rename its tools at every list_changed.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { WildcardToolLabels } from '../../shared/agent/mcp/names.ts';

test('a plain name is its own label; an odd or very long one is the selection', () => {
  const labels = new WildcardToolLabels(10);
  assert.equal(labels.of('web', 'get-sum_v1.2'), 'mcp:web/get-sum_v1.2');
  assert.equal(labels.of('web', 'x'.repeat(65)), 'mcp:web/*');
  assert.equal(labels.of('web', 'say hi'), 'mcp:web/*');
  assert.equal(labels.of('web', 'évaluer'), 'mcp:web/*');
  assert.equal(labels.of('web', 'a\u001b[2Jb'), 'mcp:web/*');
});

test('past its first names, a server renaming its tools adds no label; names already seen keep theirs', () => {
  const labels = new WildcardToolLabels(3);
  const renamed = Array.from({ length: 50 }, (_, i) => labels.of('rot', `t${i}`));
  assert.deepEqual(new Set(renamed), new Set(['mcp:rot/t0', 'mcp:rot/t1', 'mcp:rot/t2', 'mcp:rot/*']));
  assert.equal(labels.of('rot', 't1'), 'mcp:rot/t1');
  // Each server has its own names.
  assert.equal(labels.of('other', 't9'), 'mcp:other/t9');
});
