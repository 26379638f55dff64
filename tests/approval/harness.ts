// Shared by tests/approval/*.int.test.ts: a config whose `writer` and `timed` roles need a
// human's approval for write_file (and a `helper` role for sibling subtasks), and a model (on
// the local Messages-API server) that plans one gated subtask plus one sibling per goal, then
// plays the subagents: the writer calls write_file once, then answers with what it got back.
// The writer thinks (extended thinking), so every pause and resume carries thinking blocks.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before } from 'node:test';
import type { ApprovalRecord } from '../../shared/goal/approvals.ts';
import type { TimelineEvent } from '../../shared/goal/events.ts';
import { anthropicEnv } from '../../testing/agent-harness.ts';
import { type Fleet, startFleet } from '../../testing/fleet.ts';
import {
  firstUserText,
  goalOf,
  type Handler,
  type MessagesApiServer,
  type RecordedRequest,
  roleOf,
  startMessagesApiServer,
  systemText,
  text,
  toolUse,
  type WireBlock,
  type WireToolResult,
} from '../../testing/messages-api-server.ts';
import type { TestRedis } from '../../testing/redis.ts';
import { tempDir } from '../../testing/temp-dir.ts';
import { until } from '../../testing/until.ts';

export const WRITER_PROMPT = 'You are the approval test writer.';
export const WRITER_THINKING = { type: 'enabled', budgetTokens: 1024 } as const;
export const HELPER_PROMPT = 'You are the approval test helper.';

/** Writes the config file: `writer` and `timed` gate write_file; `helper` has no tools. */
export function writeApprovalConfig(): string {
  const role = (name: string, prompt: string, tools: string[], approval: string[]) => ({
    name,
    systemPrompt: prompt,
    tools,
    approval,
    middleware: ['logging', 'tokens', 'tier-routing', 'retry'],
    tier: 'LOW',
    maxTurns: 6,
    contract: 'text',
  });
  const cfg = {
    roles: [
      // With extended thinking: a paused turn's thinking must survive its checkpoint, unchanged,
      // into the resumed request (the server refuses a tool turn sent back without it).
      { ...role('writer', WRITER_PROMPT, ['write_file', 'read_file'], ['write_file']), thinking: WRITER_THINKING },
      role('timed', WRITER_PROMPT, ['write_file', 'read_file'], ['write_file']),
      role('helper', HELPER_PROMPT, [], []),
    ],
  };
  const file = join(tempDir('deepq-approval-'), 'deepq.json');
  writeFileSync(file, JSON.stringify(cfg, null, 2));
  return file;
}

/** The goal text that plans `scenario` for `role` (writer or timed), with a helper sibling. */
export const goalFor = (scenario: string, role = 'writer') => `scenario=${scenario} role=${role}`;

/** What the writer writes in each scenario (default: a plain line). */
export const CONTENTS: Record<string, string> = {};

function lastResults(messages: { content: string | WireBlock[] }[]): WireToolResult[] {
  const m = messages[messages.length - 1];
  if (!m || typeof m.content === 'string') return [];
  return m.content.filter((b): b is WireToolResult => b.type === 'tool_result');
}

export const approvalModel: Handler = (body) => {
  const kind = roleOf(body);
  if (kind === 'planner') {
    const m = /^scenario=(\S+) role=(\S+)$/.exec(goalOf(body));
    if (!m) return text('{"subtasks":[]}');
    const [, scenario, role] = m;
    const subtasks = [
      { role, instruction: `scenario=${scenario}`, expected_artifact: `${scenario}.md`, read_files: [] },
      { role: 'helper', instruction: `sibling of ${scenario}`, expected_artifact: `${scenario}-helper.md` },
    ];
    return text(JSON.stringify({ subtasks }));
  }
  if (kind === 'reflector') return text(JSON.stringify({ decision: 'end', reason: 'the scenario ran' }));
  if (systemText(body).startsWith(HELPER_PROMPT)) return text('helped');
  const scenario = /scenario=(\S+)/.exec(firstUserText(body))?.[1] ?? '';
  if (body.messages.length === 1) {
    const input = { name: `${scenario}-out.txt`, content: CONTENTS[scenario] ?? `written by ${scenario}\n` };
    return toolUse('write_file', input, { id: `toolu_${scenario}`, text: 'writing the file' });
  }
  const [r] = lastResults(body.messages);
  return text(`result: ${r?.is_error ? 'error' : 'ok'}: ${r?.content}`);
};

/** The requests a scenario's gated subagent made, in order. */
export function writerRequests(server: MessagesApiServer, scenario: string): RecordedRequest[] {
  return server
    .messageRequests()
    .filter((r) => systemText(r.body).startsWith(WRITER_PROMPT) && firstUserText(r.body) === `scenario=${scenario}`);
}

export function helperRequests(server: MessagesApiServer, scenario: string): RecordedRequest[] {
  return server
    .messageRequests()
    .filter((r) => systemText(r.body).startsWith(HELPER_PROMPT) && firstUserText(r.body).includes(`of ${scenario}`));
}

/** The tool_result blocks of a request's last message. */
export function resultsOf(r: RecordedRequest | undefined): WireToolResult[] {
  assert.ok(r, 'no such request');
  return lastResults(r.body.messages);
}

export async function events(fleet: Fleet, goalId: string): Promise<TimelineEvent[]> {
  return (await fleet.client.goals.events(goalId)).map((e) => e.event);
}

/** Waits for the goal's first pending call; returns its record. */
export async function pendingCall(fleet: Fleet, goalId: string, timeoutMs = 30_000): Promise<ApprovalRecord> {
  return until(async () => (await fleet.client.pendingApprovals(goalId))[0], timeoutMs);
}

/** A process's /metrics text. */
export async function scrape(port: number): Promise<string> {
  return (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
}

/** The value of a sample whose labels include `labels` (0 when absent). */
export function sample(metrics: string, name: string, labels = ''): number {
  const re = new RegExp(`^${name}\\{[^}]*${labels.replace(/[{}]/g, '')}[^}]*\\} (\\S+)$`, 'm');
  return Number(re.exec(metrics)?.[1] ?? 0);
}

export { until };

/**
 * The file's fleet: the approval model on a local Messages API, the approval config (plus
 * `env`), a worker for each of `roles`; started before the file's tests, stopped after.
 */
export function useApprovalFleet(
  redis: TestRedis,
  roles: string[],
  env: NodeJS.ProcessEnv,
  assign: (fleet: Fleet, server: MessagesApiServer) => void,
): void {
  let server: MessagesApiServer | undefined;
  let fleet: Fleet | undefined;
  before(async () => {
    await redis.ready;
    server = await startMessagesApiServer({ handler: approvalModel });
    fleet = await startFleet(redis.url, anthropicEnv(server, { DEEPQ_CONFIG: writeApprovalConfig(), ...env }), {
      roles,
    });
    assign(fleet, server);
  });
  after(async () => {
    await fleet?.stop();
    await server?.close();
  });
}
