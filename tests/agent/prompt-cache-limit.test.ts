// The prompt-cache middleware alone: where the history breakpoint goes, the API's limit of 4
// breakpoints (the oldest history ones are dropped first), and no change to what it was given.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  LOOKBACK_BLOCKS,
  MAX_BREAKPOINTS,
  markRequest,
  promptCache,
} from '../../shared/agent/middleware/prompt-cache.ts';
import type {
  CallContext,
  Message,
  ModelRequest,
  ModelResponse,
  ToolResultBlock,
  ToolUseBlock,
} from '../../shared/agent/providers/types.ts';

const EPH = { type: 'ephemeral' };
const tool = (name: string) => ({ name, description: name, input_schema: { type: 'object' } });
const use = (id: string): ToolUseBlock => ({ type: 'tool_use', id, name: 'list_files', input: {} });
const result = (id: string): ToolResultBlock => ({ type: 'tool_result', tool_use_id: id, content: `r${id}` });

/** A tool loop after `turns` turns of `width` parallel calls each. */
function loop(turns: number, width = 1): Message[] {
  const messages: Message[] = [{ role: 'user', content: 'task' }];
  for (let t = 0; t < turns; t++) {
    const ids = Array.from({ length: width }, (_, i) => `${t}_${i}`);
    messages.push({ role: 'assistant', content: ids.map(use) });
    messages.push({ role: 'user', content: ids.map(result) });
  }
  return messages;
}

const req = (messages: Message[], tools = [tool('a'), tool('b')]): ModelRequest => ({
  model: 'm',
  system: 'You are a test.',
  messages,
  ...(tools.length ? { tools } : {}),
  max_tokens: 100,
});

function deepFreeze<T>(v: T): T {
  if (v && typeof v === 'object') {
    for (const x of Object.values(v)) deepFreeze(x);
    Object.freeze(v);
  }
  return v;
}

/** [message, block] of every history breakpoint. */
const historyMarks = (r: ModelRequest) =>
  r.messages.flatMap((m, i) =>
    typeof m.content === 'string'
      ? []
      : m.content.flatMap((b, j) => ((b as { cache_control?: unknown }).cache_control ? [[i, j]] : [])),
  );
const total = (r: ModelRequest) => (JSON.stringify(r).match(/"cache_control":/g) ?? []).length;

test('the last block of the last message is marked, and only it, however long the loop', () => {
  for (const turns of [1, 2, 5, 9, 29]) {
    const r = markRequest(req(loop(turns)));
    const last = r.messages.length - 1;
    assert.deepEqual(historyMarks(r), [[last, 0]], `${turns} turns`);
    assert.deepEqual((r.messages[last]!.content as ToolResultBlock[])[0], {
      ...result(`${turns - 1}_0`),
      cache_control: EPH,
    });
    assert.equal(total(r), 3, 'system, last tool, last message');
  }
  const wide = markRequest(req(loop(2, 3)));
  assert.deepEqual(historyMarks(wide), [[4, 2]], 'the last of several tool results');
});

test('a first turn is marked when tools are offered (a string becomes one text block), else not', () => {
  const withTools = markRequest(req(loop(0)));
  assert.deepEqual(withTools.messages, [
    { role: 'user', content: [{ type: 'text', text: 'task', cache_control: EPH }] },
  ]);
  const without = markRequest(req(loop(0), []));
  assert.deepEqual(without.messages, [{ role: 'user', content: 'task' }]);
  assert.equal(total(without), 1);
  // A contract retry of an agent without tools: the reminder is marked.
  const retry = markRequest(
    req(
      [
        { role: 'user', content: 'task' },
        { role: 'assistant', content: [{ type: 'text', text: 'bad' }] },
        { role: 'user', content: 'Your answer was rejected' },
      ],
      [],
    ),
  );
  assert.deepEqual(historyMarks(retry), [[2, 0]]);
});

test('a request that ends with an assistant turn (a prefill) gets no history breakpoint', () => {
  const r = markRequest(req([...loop(1), { role: 'assistant', content: [{ type: 'text', text: 'Sure' }] }]));
  assert.deepEqual(historyMarks(r), []);
});

test('a turn of more than LOOKBACK_BLOCKS new blocks also marks the end of the turn before', () => {
  // Each turn of w parallel calls adds 2w blocks after the previous request's last message.
  const within = markRequest(req(loop(3, LOOKBACK_BLOCKS / 2)));
  assert.deepEqual(historyMarks(within), [[6, LOOKBACK_BLOCKS / 2 - 1]]);
  const past = markRequest(req(loop(3, LOOKBACK_BLOCKS / 2 + 1)));
  assert.deepEqual(historyMarks(past), [
    [4, LOOKBACK_BLOCKS / 2],
    [6, LOOKBACK_BLOCKS / 2],
  ]);
  assert.equal(total(past), MAX_BREAKPOINTS);
  // The first tool turn looks back to the task.
  assert.deepEqual(historyMarks(markRequest(req(loop(1, LOOKBACK_BLOCKS)))), [
    [0, 0],
    [2, LOOKBACK_BLOCKS - 1],
  ]);
});

test(`never more than ${MAX_BREAKPOINTS} breakpoints: the oldest history ones are dropped first`, () => {
  const messages = loop(4).map((m, i) =>
    typeof m.content === 'string' || i % 2 === 1
      ? m
      : { ...m, content: m.content.map((b) => ({ ...b, cache_control: { type: 'ephemeral' as const } })) },
  );
  assert.equal(historyMarks(req(messages)).length, 4, 'four marked turns arrive');
  const r = markRequest(req(messages));
  assert.equal(total(r), MAX_BREAKPOINTS);
  assert.deepEqual(historyMarks(r), [
    [6, 0],
    [8, 0],
  ]);
  // No tools: one more history breakpoint fits.
  assert.deepEqual(historyMarks(markRequest(req(messages, []))), [
    [4, 0],
    [6, 0],
    [8, 0],
  ]);
  // A system prompt already holding breakpoints leaves room for the latest turn only.
  const crowded = markRequest({
    ...req(messages),
    system: [
      { type: 'text', text: 'a', cache_control: { type: 'ephemeral' } },
      { type: 'text', text: 'b' },
    ],
  });
  assert.equal(total(crowded), MAX_BREAKPOINTS);
  assert.deepEqual(historyMarks(crowded), [[8, 0]]);
});

test('the request it is given is not changed; the marked request goes to the next layer', async () => {
  const given = deepFreeze(req(loop(3, 2)));
  const before = JSON.stringify(given);
  let seen: ModelRequest | undefined;
  const res: ModelResponse = {
    model: 'm',
    content: [],
    stop_reason: 'end_turn',
    usage: { input_tokens: 1, output_tokens: 1 },
  };
  const out = await promptCache()(given, {} as CallContext, async (r) => {
    seen = r;
    return res;
  });
  assert.equal(out, res);
  assert.equal(JSON.stringify(given), before);
  assert.ok(seen && seen !== given && seen.messages !== given.messages);
  assert.deepEqual(historyMarks(seen), [[6, 1]]);
  // Unmarked messages are passed on as they are (no needless copies of a long history).
  assert.equal(seen.messages[1], given.messages[1]);
  assert.equal(seen.messages[5], given.messages[5]);
});
