// Long tool results and transcript blocks are cut to a size, never between the halves of a
// surrogate pair: a lone half is JSON the Messages API and Redis's cjson refuse.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TRUNCATION_MARKER, truncate } from '../../shared/agent/create-agent.ts';
import { compactMessages } from '../../shared/agent/transcripts.ts';

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
// An emoji (two UTF-16 units) straddling the cut at 10.
const TEXT = `${'a'.repeat(9)}😀${'x'.repeat(20)}`;

test('a tool result cut at its limit keeps whole characters', () => {
  const cut = truncate(TEXT, 10);
  assert.equal(cut, 'a'.repeat(9) + TRUNCATION_MARKER, 'the whole emoji goes, not half of it');
  assert.doesNotMatch(cut, LONE_SURROGATE);
  assert.equal(truncate('short', 10), 'short');
});

test('a stored transcript elides text, tool results and inputs without splitting a character', () => {
  const [user, assistant] = compactMessages(
    [
      { role: 'user', content: TEXT },
      {
        role: 'assistant',
        content: [
          { type: 'text', text: TEXT },
          { type: 'tool_result', tool_use_id: 't1', content: TEXT },
        ],
      },
    ],
    10,
  );
  assert.doesNotMatch(String(user?.content), LONE_SURROGATE);
  assert.match(String(user?.content), /chars elided/);
  for (const block of (assistant?.content ?? []) as { text?: string; content?: string }[]) {
    assert.doesNotMatch(block.text ?? block.content ?? '', LONE_SURROGATE);
  }
});
