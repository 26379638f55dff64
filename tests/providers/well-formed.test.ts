// A lone UTF-16 surrogate anywhere in a request makes the model APIs refuse it (400) on every
// retry: the router hands the providers well-formed requests, and copies only when it must.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ModelRequest } from '../../shared/agent/providers/types.ts';
import { wellFormedRequest } from '../../shared/agent/providers/well-formed.ts';

const request = (half: string): ModelRequest => ({
  model: 'claude-test',
  system: [{ type: 'text', text: `You review ${half}` }],
  max_tokens: 100,
  messages: [
    { role: 'user', content: 'Review it' },
    {
      role: 'assistant',
      content: [{ type: 'tool_use', id: 'tu1', name: 'read_file', input: { name: `a${half}.md` } }],
    },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'tu1', content: `text cut at ${half}` }] },
  ],
});

test('a well-formed request goes as it is, not copied', () => {
  const req = request('🔍');
  assert.equal(wellFormedRequest(req), req);
});

test('each lone surrogate, in the system text, a tool input or a tool result, becomes U+FFFD', () => {
  const req = request('\ud83d');
  const sent = wellFormedRequest(req);
  assert.notEqual(sent, req);
  assert.ok(JSON.stringify(sent).includes('You review \uFFFD'), JSON.stringify(sent.system));
  const [, use, result] = sent.messages;
  assert.deepEqual((use!.content as { input: unknown }[])[0]!.input, { name: 'a\uFFFD.md' });
  assert.equal((result!.content as { content: string }[])[0]!.content, 'text cut at \uFFFD');
  assert.equal(sent.max_tokens, 100);
  assert.ok(JSON.stringify(req).includes('\\ud83d'), 'the caller’s request is left as it was');
});
