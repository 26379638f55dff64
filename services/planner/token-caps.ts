// The smallest token_cap a plan may give each role's subtask: one call must fit under it, with
// the role's system prompt and tool definitions as its input and MIN_CALL_TOKENS to answer. A
// smaller cap stopped the subtask before its first call ("partial", 0 tokens) and wasted the
// cycle. An estimate (chars/4, as the worker counts): MCP tools, whose definitions only the
// worker has, and the subtask's files are not counted; the instruction is, per subtask.
import { estimateInputTokens, MIN_CALL_TOKENS } from '../../shared/agent/providers/types.ts';
import type { Tool, ToolScope } from '../../shared/agent/tools.ts';
import { createSandboxTools, createVfsTools } from '../../shared/agent/tools.ts';
import type { Runtime } from '../../shared/runtime/runtime.ts';

const byRuntime = new WeakMap<Runtime, Record<string, number>>();

/** Per role name, the tokens of one call with no task text; built once per process. */
export function minTokenCaps(rt: Runtime): Record<string, number> {
  const known = byRuntime.get(rt);
  if (known) return known;
  const caps: Record<string, number> = {};
  for (const role of rt.cfg.roles) {
    const tools = builtInTools(rt, role);
    const input = estimateInputTokens({ system: role.systemPrompt, messages: [], tools: tools.map((t) => t.def) });
    caps[role.name] = input + MIN_CALL_TOKENS;
  }
  byRuntime.set(rt, caps);
  return caps;
}

/** The role's built-in tools as a job would bind them (only their definitions are read). */
function builtInTools(rt: Runtime, role: Runtime['cfg']['roles'][number]): Tool[] {
  const scope: ToolScope = { goalId: 'x', step: 1, role: role.name, threadId: 'x', writer: 'x' };
  const sandbox = { vfs: rt.vfs, limits: role.sandbox };
  return [...createVfsTools(rt.vfs, scope, role.tools), ...createSandboxTools(sandbox, scope, role.tools)];
}

/** The task message around the instruction (the goal, the files to read, the artifact's name). */
const TASK_FRAMING_TOKENS = 64;

/** What one call of a subtask needs: its role's fixed input, its task message, and an answer. */
export function minTokenCapOf(caps: Record<string, number>, role: string, instruction: string): number | undefined {
  const fixed = caps[role];
  return fixed === undefined ? undefined : fixed + TASK_FRAMING_TOKENS + Math.ceil(instruction.length / 4);
}
