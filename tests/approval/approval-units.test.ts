// Approvals without Redis: which configured tool names an approval entry covers, the config
// checks (an entry that matches none of its role's tools, a timeout that would outlive the
// goal's keys), and how `deepq watch` shows a call waiting for a human (escaped).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { formatEventLine, TimelineView } from '../../cli/timeline.ts';
import { approvalCovers, approvalGate, approvalMatchesRoleTool, refusalText } from '../../shared/agent/approval.ts';
import { ConfigError } from '../../shared/errors.ts';
import type { TimelineEvent } from '../../shared/goal/events.ts';
import { loadConfig } from '../../shared/runtime/config.ts';

test('an approval entry covers its own name, and mcp:<server>/* every tool of that server', () => {
  assert.ok(approvalCovers('write_file', 'write_file'));
  assert.ok(!approvalCovers('write_file', 'edit_file'));
  assert.ok(approvalCovers('mcp:github/*', 'mcp:github/create_issue'));
  assert.ok(approvalCovers('mcp:github/create_issue', 'mcp:github/create_issue'));
  assert.ok(!approvalCovers('mcp:github/create_issue', 'mcp:github/list_issues'));
  assert.ok(!approvalCovers('mcp:github/*', 'mcp:githubx/create_issue'), 'a server name prefix is not the server');
  assert.ok(!approvalCovers('mcp:github/*', 'write_file'));
  const gate = approvalGate(['run_code', 'mcp:github/*']);
  assert.deepEqual(
    ['run_code', 'mcp:github/merge', 'read_file', 'unknown'].map((t) => gate.needs(t)),
    [true, true, false, false],
  );
  // Against a role's tools entries, both ways round (`mcp:s/*` in tools, one tool of it gated).
  assert.ok(approvalMatchesRoleTool('mcp:github/merge', 'mcp:github/*'));
  assert.ok(approvalMatchesRoleTool('mcp:github/*', 'mcp:github/merge'));
  assert.ok(!approvalMatchesRoleTool('mcp:github/*', 'mcp:gitlab/*'));
  assert.equal(refusalText({ status: 'rejected' }), 'error: a human rejected this call, it was not run');
});

function roles(approval: string[], tools = ['read_file', 'write_file', 'mcp:github/*']) {
  return [
    ...loadConfig({}).roles.slice(0, 2),
    { name: 'gated', systemPrompt: 'You act.', tools, approval, contract: 'text' },
  ];
}
const mcpServers = { github: { type: 'http', url: 'https://mcp.example.com/mcp' } };

test('the config refuses an approval entry that matches none of its role tools, naming it', () => {
  const ok = loadConfig({}, { roles: roles(['write_file', 'mcp:github/merge']), mcpServers });
  assert.deepEqual(ok.roles[2]!.approval, ['write_file', 'mcp:github/merge']);
  assert.equal(ok.approvalTimeoutSeconds, 86_400);
  assert.throws(
    () => loadConfig({}, { roles: roles(['write_file', 'edit_file', 'mcp:gitlab/*']), mcpServers }),
    (e: Error) => {
      assert.ok(e instanceof ConfigError);
      assert.match(e.message, /roles\.2\.approval\.1: approval entry "edit_file" matches none of the role's tools/);
      assert.match(e.message, /roles\.2\.approval\.2: approval entry "mcp:gitlab\/\*" matches none/);
      assert.doesNotMatch(e.message, /approval\.0/);
      return true;
    },
  );
  assert.throws(() => loadConfig({}, { roles: roles(['bogus_tool']), mcpServers }), /unknown tool "bogus_tool"/);
});

test('approvalTimeoutSeconds comes from DEEPQ_APPROVAL_TIMEOUT_SECONDS and is at most half the key TTL', () => {
  assert.equal(loadConfig({ DEEPQ_APPROVAL_TIMEOUT_SECONDS: '30' }).approvalTimeoutSeconds, 30);
  const ttl = { DEEPQ_GOAL_KEY_TTL_SECONDS: '600' };
  assert.equal(loadConfig({ DEEPQ_APPROVAL_TIMEOUT_SECONDS: '300', ...ttl }).approvalTimeoutSeconds, 300);
  assert.throws(
    () => loadConfig({ DEEPQ_APPROVAL_TIMEOUT_SECONDS: '301', ...ttl }),
    /approvalTimeoutSeconds \(DEEPQ_APPROVAL_TIMEOUT_SECONDS\): must be at most half of goalKeyTtlSeconds \(600\)/,
  );
  assert.throws(() => loadConfig({ DEEPQ_APPROVAL_TIMEOUT_SECONDS: 'soon' }), /expected an integer/);
});

const HOSTILE = '{"cmd":"\u001b[2J\u009b31m"}';
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
const RAW = /[\u001b\u009b]/;
const at = 1_000;
const ref = { step: 1, index: 0, role: 'writer', threadId: 'goal-abcdef--writer-1', tool: 'write_file' };
const EVENTS: TimelineEvent[] = [
  { type: 'dispatched', at, step: 1, subtasks: [{ index: 0, role: 'writer', artifact: 'a.md' }] },
  {
    type: 'subtask_started',
    at,
    step: 1,
    index: 0,
    role: 'writer',
    artifact: 'a.md',
    threadId: ref.threadId,
    attempt: 1,
  },
  { type: 'approval_requested', at, ...ref, callId: 'ap-0123456789', input: HOSTILE, expiresAt: 90_000 },
];

test('watch shows a subtask waiting for approval, with the call id and the input escaped', () => {
  const view = new TimelineView();
  for (const e of EVENTS) view.apply(e);
  const tree = view.render();
  assert.match(tree, /\[0\] writer\s+a\.md\s+awaiting approval/);
  assert.ok(tree.includes('⏸ ap-0123456789 write_file {"cmd":"\\u001b[2J\\u009b31m"}'), tree);
  assert.doesNotMatch(tree, RAW);
  const line = formatEventLine(EVENTS[2]!, 0);
  assert.match(line, /cycle 1 \[0\] writer approval requested ap-0123456789: write_file \{"cmd":"\\u001b\[2J/);
  assert.doesNotMatch(line, RAW);

  view.apply({ type: 'approval_decided', at, ...ref, callId: 'ap-0123456789', decision: 'rejected', reason: 'no' });
  assert.match(view.render(), /\[0\] writer\s+a\.md\s+running/);
  assert.doesNotMatch(view.render(), /ap-0123456789/);
});
