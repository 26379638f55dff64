// One factory for every agent: planner, each subagent role, reflector (seed 003). Agents
// differ only in data: system prompt, tools, middleware, tier, limits, output contract.
// The loop (seed 004): a fresh message list, tool calls run and truncated, stop when the
// model stops calling tools or at maxTurns; only the final text returns. A turn calling a tool
// that needs a human's approval pauses the run (ApprovalPause, ./approval.ts); a paused run
// resumes from its checkpoint without repeating that turn's model call.

import type { Metrics } from '../runtime/metrics.ts';
import {
  type AgentCheckpoint,
  type ApprovalDecision,
  type ApprovalGate,
  ApprovalPause,
  type AwaitingCall,
  refusalText,
} from './approval.ts';
import { buildMiddleware, compose, type MiddlewareDeps } from './middleware/index.ts';
import type { OutputContract } from './output-contracts.ts';
import type {
  CallContext,
  Message,
  ModelProvider,
  ModelRequest,
  ModelResponse,
  ToolResultBlock,
  ToolUseBlock,
} from './providers/types.ts';
import { ModelCallError, responseText } from './providers/types.ts';
import type { AgentSpec } from './roles.ts';
import type { Tool } from './tools.ts';

export const TRUNCATION_MARKER = '\n[... truncated by deepq: tool result exceeded the limit ...]';

export function truncate(text: string, max: number): string {
  return text.length > max ? text.slice(0, max) + TRUNCATION_MARKER : text;
}

export interface AgentDeps extends MiddlewareDeps {
  provider: ModelProvider;
  metrics?: Metrics;
  toolResultMaxChars?: number;
}

/** One tool call, as metrics and the timeline see it: no input, no output. */
export interface ToolCallRecord {
  /** The configured tool name (`Tool.label`, else its def name), or `unknown` for a name no tool has. */
  tool: string;
  ms: number;
  ok: boolean;
}

export interface RunOptions {
  /** The whole task as one user message: instruction plus read_files contents. */
  task: string;
  tools?: Tool[];
  contract: OutputContract;
  ctx: Omit<CallContext, 'tier' | 'contract'>;
  /** Called after each tool call (awaited, in order); a subagent job appends a `tool_called` event. */
  onToolCall?: (call: ToolCallRecord) => void | Promise<void>;
  /** Which tools wait for a human's approval, and the decisions known for `resume`'s calls. */
  approval?: ApprovalGate;
  /** Go on from a paused turn (its calls decided in `approval.decisions`); `task` is unused then. */
  resume?: AgentCheckpoint;
}

export interface AgentRun<T = unknown> {
  ok: boolean;
  /** The final text (of the last attempt). */
  text: string;
  value?: T;
  /** Set when the contract failed twice, or the turn limit was hit without an answer. */
  problem?: string;
  turns: number;
  contractRetries: number;
  messages: Message[];
}

export interface Agent {
  readonly spec: AgentSpec;
  run<T = unknown>(opts: RunOptions): Promise<AgentRun<T>>;
}

export function createAgent(spec: AgentSpec, deps: AgentDeps): Agent {
  const stack = buildMiddleware(spec.middleware, deps);
  return {
    spec,
    async run<T>(opts: RunOptions): Promise<AgentRun<T>> {
      const ctx: CallContext = { ...opts.ctx, tier: spec.tier, contract: opts.contract.name };
      const call = compose(stack, ctx, (req) => callProvider(deps, req, ctx));
      const conv = conversation(spec, deps, opts, call, ctx.role);
      const stopped = () => `stopped at the turn limit (${spec.maxTurns}) without a final answer`;
      const result = (r: Omit<AgentRun<T>, 'turns' | 'messages'>): AgentRun<T> => ({
        ...r,
        turns: conv.turns,
        messages: conv.messages,
      });

      let resume = opts.resume;
      if (!conv.contractRetry) {
        const first = await runTurns(conv, resume);
        resume = undefined;
        if (first === null) return result({ ok: false, text: '', problem: stopped(), contractRetries: 0 });
        const verdict = opts.contract.check(first);
        if (verdict.ok) return result({ ok: true, text: first, value: verdict.value as T, contractRetries: 0 });
        // Reject and retry once with a reminder naming what was wrong (seed 000).
        deps.metrics?.contractRejections.inc({ role: ctx.role, outcome: 'retried' });
        const again = `Reply again with ONLY ${opts.contract.describe}.`;
        const reminder = `Your answer was rejected: ${verdict.problem}. ${again}`;
        conv.messages.push({ role: 'user', content: reminder });
        conv.contractRetry = true;
        conv.phaseTurns = 0;
      }
      const text = await runTurns(conv, resume);
      if (text === null) return result({ ok: false, text: '', problem: stopped(), contractRetries: 1 });
      const verdict = opts.contract.check(text);
      if (verdict.ok) return result({ ok: true, text, value: verdict.value as T, contractRetries: 1 });
      deps.metrics?.contractRejections.inc({ role: ctx.role, outcome: 'failed' });
      const problem = `output broke the ${opts.contract.name} contract twice: ${verdict.problem}`;
      return result({ ok: false, text, problem, contractRetries: 1 });
    },
  };
}

function conversation(
  spec: AgentSpec,
  deps: AgentDeps,
  opts: RunOptions,
  call: Conversation['call'],
  role: string,
): Conversation {
  const cp = opts.resume;
  return {
    spec,
    call,
    tools: new Map((opts.tools ?? []).map((t) => [t.def.name, t])),
    maxChars: deps.toolResultMaxChars ?? 50_000,
    role,
    metrics: deps.metrics,
    onToolCall: opts.onToolCall,
    approval: opts.approval,
    // P52: a run starts fresh with the task alone; a resumed one with its own saved messages.
    messages: cp ? [...cp.messages] : [{ role: 'user', content: opts.task }],
    turns: cp?.turns ?? 0,
    phaseTurns: cp?.phaseTurns ?? 0,
    contractRetry: cp?.contractRetry ?? false,
  };
}

async function callProvider(deps: AgentDeps, req: ModelRequest, ctx: CallContext): Promise<ModelResponse> {
  const started = performance.now();
  const labels = { provider: deps.provider.name, model: req.model, role: ctx.role };
  try {
    const res = await deps.provider.createMessage(req, ctx);
    deps.metrics?.llmRequests.inc({ ...labels, status: 'ok' });
    return res;
  } catch (err) {
    deps.metrics?.llmRequests.inc({ ...labels, status: err instanceof ModelCallError ? err.kind : 'error' });
    throw err;
  } finally {
    deps.metrics?.llmLatency.observe(labels, (performance.now() - started) / 1000);
  }
}

interface Conversation {
  spec: AgentSpec;
  call: (req: ModelRequest) => Promise<ModelResponse>;
  tools: Map<string, Tool>;
  maxChars: number;
  role: string;
  metrics?: Metrics;
  onToolCall?: RunOptions['onToolCall'];
  approval?: ApprovalGate;
  messages: Message[];
  /** Model calls in all, and in the current phase (each phase has maxTurns). */
  turns: number;
  phaseTurns: number;
  contractRetry: boolean;
}

/**
 * Turns until the model stops calling tools (its final text) or the turn limit (null). With a
 * checkpoint, its paused turn's tools run first (with the decisions): no model call repeated.
 */
async function runTurns(c: Conversation, resume?: AgentCheckpoint): Promise<string | null> {
  if (resume) {
    // Still undecided: the same pause again, nothing run (the job waits on).
    if (resume.awaiting.some((a) => !c.approval?.decisions?.has(a.index))) throw new ApprovalPause(resume);
    c.messages.push({ role: 'user', content: await runTools(c, resume.uses, resume.awaiting) });
  }
  while (c.phaseTurns < c.spec.maxTurns) {
    c.turns++;
    c.phaseTurns++;
    const res = await c.call({
      model: c.spec.tier, // replaced by tier routing; a bare tier name fails loudly without it
      system: c.spec.systemPrompt,
      messages: [...c.messages],
      ...(c.tools.size ? { tools: [...c.tools.values()].map((t) => t.def) } : {}),
      max_tokens: c.spec.maxTokens,
    });
    const uses = res.content.filter((b): b is ToolUseBlock => b.type === 'tool_use');
    const final = res.stop_reason !== 'tool_use' || uses.length === 0;
    // Keep the history one the API accepts when it is sent again (a contract retry):
    // no blank text blocks, no empty assistant turn, and no tool_use left without its
    // tool_result (a final turn cut off by max_tokens mid tool call runs no tools).
    const kept = res.content.filter((b) =>
      b.type === 'text' ? b.text.trim() !== '' : !(final && b.type === 'tool_use'),
    );
    if (kept.length) c.messages.push({ role: 'assistant', content: kept });
    if (final) return responseText(res);
    pauseIfGated(c, uses);
    c.messages.push({ role: 'user', content: await runTools(c, uses) });
  }
  return null;
}

/** No tool of a turn runs while one of its calls waits for a human: the run pauses before any. */
function pauseIfGated(c: Conversation, uses: ToolUseBlock[]): void {
  const gate = c.approval;
  if (!gate) return;
  const awaiting: AwaitingCall[] = [];
  for (const [index, use] of uses.entries()) {
    const tool = c.tools.get(use.name);
    const label = tool ? (tool.label ?? tool.def.name) : undefined;
    if (label !== undefined && gate.needs(label)) awaiting.push({ index, tool: label });
  }
  if (!awaiting.length) return;
  const { turns, phaseTurns, contractRetry } = c;
  throw new ApprovalPause({ messages: [...c.messages], turns, phaseTurns, contractRetry, uses, awaiting });
}

/**
 * Runs each tool call, in order. An unknown tool, bad input or a thrown error becomes an
 * is_error result naming the problem; every result is cut at maxChars with a marker. Each call
 * is counted under its configured tool name (`unknown` for a name the model made up), timed,
 * and reported to onToolCall.
 */
async function runTools(c: Conversation, uses: ToolUseBlock[], decided?: AwaitingCall[]): Promise<ToolResultBlock[]> {
  const results: ToolResultBlock[] = [];
  for (const [i, use] of uses.entries()) {
    const tool = c.tools.get(use.name);
    const label = tool ? (tool.label ?? tool.def.name) : 'unknown';
    const refused = decided?.some((a) => a.index === i) ? refusal(c.approval?.decisions?.get(i)) : undefined;
    const started = performance.now();
    const result = refused ? refusedCall(c, use, refused) : tool ? await runTool(c, tool, use) : unknownTool(c, use);
    const ms = performance.now() - started;
    const ok = !result.is_error;
    const status = refused ? 'refused' : ok ? 'ok' : 'error';
    c.metrics?.toolCalls.inc({ role: c.role, tool: label, status });
    if (tool && !refused) c.metrics?.toolLatency.observe({ role: c.role, tool: label }, ms / 1000);
    results.push(result);
    await c.onToolCall?.({ tool: label, ms: Math.round(ms), ok });
  }
  return results;
}

/** A decision other than `approved`, or undefined when the call may run. */
function refusal(d: ApprovalDecision | undefined): ApprovalDecision | undefined {
  return d && d.status !== 'approved' ? d : undefined;
}

/** A call a human did not approve: never run; the model reads why. */
function refusedCall(c: Conversation, use: ToolUseBlock, d: ApprovalDecision): ToolResultBlock {
  return { type: 'tool_result', tool_use_id: use.id, content: truncate(refusalText(d), c.maxChars), is_error: true };
}

function unknownTool(c: Conversation, use: ToolUseBlock): ToolResultBlock {
  const available = [...c.tools.keys()].join(', ') || 'none';
  const content = truncate(`error: unknown tool ${JSON.stringify(use.name)} (available: ${available})`, c.maxChars);
  return { type: 'tool_result', tool_use_id: use.id, content, is_error: true };
}

async function runTool(c: Conversation, tool: Tool, use: ToolUseBlock): Promise<ToolResultBlock> {
  try {
    return { type: 'tool_result', tool_use_id: use.id, content: truncate(await tool.run(use.input), c.maxChars) };
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    const content = truncate(`error: ${message}`, c.maxChars);
    return { type: 'tool_result', tool_use_id: use.id, content, is_error: true };
  }
}
