/// <reference lib="es2024.string" />
// One factory for every agent: planner, each subagent role, reflector (seed 003). Agents
// differ only in data: system prompt, tools, middleware, tier, limits, output contract.
// The loop (seed 004): a fresh message list, tool calls run and truncated, stop when the
// model stops calling tools or at maxTurns; only the final text returns. A turn calling a tool
// that needs a human's approval pauses the run (ApprovalPause, ./approval.ts); a paused run
// resumes from its checkpoint without repeating that turn's model call. With a token cap (a
// plan's per-subtask cap) each call's max output shrinks to what the cap leaves; near the cap
// the model is told to finish, and at it the run stops, partial, with the text it had. A call
// the goal's budget refuses stops the run with a checkpoint (BudgetRefused) to go on from.

import { BudgetExceededError, ErrorCode, hasCode, ProviderRateLimitError } from '../errors.ts';
import type { Metrics } from '../runtime/metrics.ts';
import { annotate, failSpan, inSpan, SPAN_KIND_CLIENT, type Span, type SpanAttrs } from '../runtime/tracing.ts';
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
import { metricLabelsOf } from './providers/model-labels.ts';
import type {
  CallContext,
  Message,
  ModelProvider,
  ModelRequest,
  ModelResponse,
  ThinkingParam,
  ToolResultBlock,
  ToolUseBlock,
} from './providers/types.ts';
import { estimateInputTokens, MIN_CALL_TOKENS, ModelCallError, responseText, usageTotal } from './providers/types.ts';
import type { AgentSpec, ThinkingSpec } from './roles.ts';
import { refusedInput, withBoundedToolInputs } from './tool-input.ts';
import { cutChars } from './tools/paging.ts';
import type { Tool } from './tools.ts';

export const TRUNCATION_MARKER = '\n[... truncated by deepq: tool result exceeded the limit ...]';
/** Share of its token cap after which a run is told to finish. */
export const NEAR_CAP_SHARE = 0.8;

export function nearCapNotice(used: number, cap: number): string {
  return (
    `[deepq: this task has used ${used} of its ${cap}-token budget. Finish now: reply with your final ` +
    'answer, without calling more tools.]'
  );
}

/**
 * The conversation as it stood before a call that failed in a way worth another try (a 429, or
 * a fault that outlasted the retries in place): a retry of the job goes on from there, neither
 * asking the earlier turns again nor running their tools again.
 */
const beforeFailedCall = new WeakMap<Error, AgentCheckpoint>();
/** What a contract retry's reminder quotes of the problem at most: it goes back to the model. */
const REMINDER_PROBLEM_CHARS = 2000;

/** The checkpoint taken when `err` (a run's failed model call) stopped the run, if any. */
export function checkpointBeforeFailedCall(err: unknown): AgentCheckpoint | undefined {
  return err instanceof Error ? beforeFailedCall.get(err) : undefined;
}

/** The goal's budget refused a model call: nothing was spent, and the run can go on from `checkpoint`. */
export class BudgetRefused extends Error {
  override name = 'BudgetRefused';
  constructor(
    readonly hit: BudgetExceededError,
    readonly checkpoint: AgentCheckpoint,
  ) {
    super(hit.message);
  }
}

export function truncate(text: string, max: number): string {
  return text.length > max ? cutChars(text, max) + TRUNCATION_MARKER : text;
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
  /** An at-most-once call whose run died while it ran: not made again, its outcome unknown. */
  unknown?: true;
}

export interface RunOptions {
  /** The whole task as one user message: instruction plus read_files contents. */
  task: string;
  tools?: Tool[];
  contract: OutputContract;
  ctx: Omit<CallContext, 'tier' | 'contract'>;
  /**
   * Called after each tool call (awaited, in order), with the run's checkpoint after it (none when
   * the job's abort cut the call short): a subagent job appends a `tool_called` event and stores
   * the checkpoint, so that a redelivery after its process died runs none of the calls done again.
   */
  onToolCall?: (call: ToolCallRecord, progress?: AgentCheckpoint) => void | Promise<void>;
  /**
   * Called before each call of an at-most-once tool (Tool.atMostOnce), with the checkpoint that
   * marks it started: the call goes out once that is stored (a throw stops the run, the call not
   * made), and a start from that checkpoint does not run it again. Without it such calls run
   * as any other.
   */
  onToolStart?: (checkpoint: AgentCheckpoint) => Promise<void>;
  /** Which tools wait for a human's approval, and the decisions known for `resume`'s calls. */
  approval?: ApprovalGate;
  /** Go on from a paused turn (its calls decided in `approval.decisions`); `task` is unused then. */
  resume?: AgentCheckpoint;
  /**
   * Called once `resume`'s tools have run, with the checkpoint after them (their results in the
   * messages, no tool uses): stored in place of the paused one, a retry of this attempt goes on
   * from there and never runs an approved call twice.
   */
  onResumedTurn?: (checkpoint: AgentCheckpoint) => Promise<void>;
  /** The most tokens the run may use (input and output of all its calls); past it, it stops partial. */
  tokenCap?: number;
}

export interface AgentRun<T = unknown> {
  ok: boolean;
  /** The final text (of the last attempt). */
  text: string;
  value?: T;
  /** Set when the contract failed twice, or the turn limit or token cap was hit without an answer. */
  problem?: string;
  /** Stopped at its token cap: `text` is the last text it wrote, unchecked. */
  partial?: boolean;
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
      const ctx: CallContext = { ...opts.ctx, tier: spec.tier, ...ownModel(spec), contract: opts.contract.name };
      const call = compose(stack, ctx, (req) => callProvider(deps, req, ctx));
      const conv = conversation(spec, deps, opts, call, ctx.role);
      const result = (r: Omit<AgentRun<T>, 'turns' | 'messages'>): AgentRun<T> => ({
        ...r,
        turns: conv.turns,
        messages: conv.messages,
      });

      let resume = opts.resume;
      if (!conv.contractRetry) {
        const first = await runTurns(conv, resume);
        resume = undefined;
        if ('stop' in first) return result(stopped(conv, first.stop, 0));
        const verdict = judge(conv, first, opts.contract);
        if (verdict.ok) return result({ ok: true, text: first.text, value: verdict.value as T, contractRetries: 0 });
        // Reject and retry once with a reminder naming what was wrong (seed 000).
        deps.metrics?.contractRejections.inc({ role: ctx.role, outcome: 'retried' });
        const again = `Reply again with ONLY ${opts.contract.describe}.`;
        const problem = cutChars(verdict.problem, REMINDER_PROBLEM_CHARS).toWellFormed();
        const reminder = `Your answer was rejected: ${problem}. ${again}`;
        conv.messages.push({ role: 'user', content: reminder });
        conv.contractRetry = true;
        conv.phaseTurns = 0;
      }
      const second = await runTurns(conv, resume);
      if ('stop' in second) return result(stopped(conv, second.stop, 1));
      const verdict = judge(conv, second, opts.contract);
      if (verdict.ok) return result({ ok: true, text: second.text, value: verdict.value as T, contractRetries: 1 });
      deps.metrics?.contractRejections.inc({ role: ctx.role, outcome: 'failed' });
      const problem = verdict.unfinished
        ? `${verdict.problem}, on the retry too`
        : `output broke the ${opts.contract.name} contract twice: ${verdict.problem}`;
      return result({ ok: false, text: second.text, problem, contractRetries: 1 });
    },
  };
}

/**
 * The verdict on a final answer. One the model did not finish (cut at the role's maxTokens, or a
 * refusal) is no answer whatever its text: a text contract would take a cut-off summary whole.
 */
function judge<T>(
  c: Conversation,
  end: FinalText,
  contract: OutputContract<T>,
): { ok: true; value: T } | { ok: false; problem: string; unfinished?: boolean } {
  if (end.stopReason === 'max_tokens') {
    const problem = `the answer was cut off at the role's maxTokens (${c.spec.maxTokens} output tokens)`;
    return { ok: false, problem, unfinished: true };
  }
  if (end.stopReason === 'refusal') {
    const said = end.text.trim() ? `: ${cutChars(end.text.trim(), 200)}` : '';
    return { ok: false, problem: `the model declined to answer (stop reason refusal)${said}`, unfinished: true };
  }
  return contract.check(end.text);
}

/** A run that ended without an accepted answer: at the turn limit, or at its token cap (partial). */
function stopped<T>(c: Conversation, stop: 'turns' | 'cap', retries: number): Omit<AgentRun<T>, 'turns' | 'messages'> {
  if (stop === 'turns') {
    const problem = `stopped at the turn limit (${c.spec.maxTurns}) without a final answer`;
    return { ok: false, text: '', problem, contractRetries: retries };
  }
  const problem = `stopped at its token cap (${c.cap!.used} of ${c.cap!.limit} tokens): partial`;
  return { ok: false, partial: true, text: lastText(c.messages), problem, contractRetries: retries };
}

/** The newest non-blank text the model wrote: what a run stopped at its cap has to show. */
function lastText(messages: Message[]): string {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]!;
    if (m.role !== 'assistant') continue;
    const text =
      typeof m.content === 'string' ? m.content : m.content.map((b) => (b.type === 'text' ? b.text : '')).join('');
    if (text.trim()) return text;
  }
  return '';
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
    onToolStart: opts.onToolStart,
    onResumedTurn: opts.onResumedTurn,
    signal: opts.ctx.signal,
    approval: opts.approval,
    // P52: a run starts fresh with the task alone; a resumed one with its own saved messages.
    messages: cp ? [...cp.messages] : [{ role: 'user', content: opts.task }],
    turns: cp?.turns ?? 0,
    phaseTurns: cp?.phaseTurns ?? 0,
    contractRetry: cp?.contractRetry ?? false,
    cap: opts.tokenCap
      ? { limit: opts.tokenCap, used: cp?.tokensUsed ?? 0, warned: cp?.capWarned ?? false }
      : undefined,
    inputRatio: 1,
  };
}

/** The agent's own model, which tier routing sends instead of its tier's. */
function ownModel(spec: AgentSpec): Pick<CallContext, 'roleModel'> {
  return spec.model ? { roleModel: spec.model } : {};
}

/** A model call's span: what gen_ai's semantic conventions name, and where in the goal it ran. */
function modelCallSpan(provider: string, req: ModelRequest, ctx: CallContext): SpanAttrs {
  return {
    'gen_ai.operation.name': 'chat',
    'gen_ai.provider.name': provider,
    'gen_ai.request.model': req.model,
    'gen_ai.request.max_tokens': req.max_tokens,
    'deepq.goal.id': ctx.goalId,
    'deepq.step': ctx.step,
    'deepq.role': ctx.role,
    'deepq.thread_id': ctx.threadId,
  };
}

function callProvider(deps: AgentDeps, req: ModelRequest, ctx: CallContext): Promise<ModelResponse> {
  const attrs = modelCallSpan(deps.provider.name, req, ctx);
  return inSpan(`chat ${req.model}`, attrs, (span) => measuredCall(deps, req, ctx, span), SPAN_KIND_CLIENT);
}

async function measuredCall(deps: AgentDeps, req: ModelRequest, ctx: CallContext, span?: Span) {
  const started = performance.now();
  const labels = { ...metricLabelsOf(deps.provider, req.model), role: ctx.role };
  const metrics = deps.metrics;
  const sinceStart = () => (performance.now() - started) / 1000;
  const timed = metrics ? { ...ctx, onFirstOutput: () => metrics.llmFirstOutput.observe(labels, sinceStart()) } : ctx;
  try {
    const res = await deps.provider.createMessage(req, timed);
    metrics?.llmRequests.inc({ ...labels, status: 'ok' });
    annotate(span, {
      'gen_ai.response.model': res.model,
      'gen_ai.response.finish_reasons': res.stop_reason ? [res.stop_reason] : undefined,
      'gen_ai.usage.input_tokens': res.usage.input_tokens,
      'gen_ai.usage.output_tokens': res.usage.output_tokens,
    });
    return res;
  } catch (err) {
    metrics?.llmRequests.inc({ ...labels, status: err instanceof ModelCallError ? err.kind : 'error' });
    throw err;
  } finally {
    metrics?.llmLatency.observe(labels, sinceStart());
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
  onToolStart?: RunOptions['onToolStart'];
  onResumedTurn?: RunOptions['onResumedTurn'];
  /** The job's abort (cancel, shutdown): a decided turn it cut short is not saved. */
  signal?: AbortSignal;
  approval?: ApprovalGate;
  messages: Message[];
  /** Model calls in all, and in the current phase (each phase has maxTurns). */
  turns: number;
  phaseTurns: number;
  contractRetry: boolean;
  /** The run's token cap: tokens used so far, and whether the model was told to finish. */
  cap?: { limit: number; used: number; warned: boolean };
  /** Real input tokens per estimated one, from the run's last call (at least 1). */
  inputRatio: number;
}

/** A final answer, with why the model stopped (max_tokens, refusal: not a finished answer). */
type FinalText = { text: string; stopReason: string | null };
type TurnsEnd = FinalText | { stop: 'turns' | 'cap' };

/**
 * Turns until the model stops calling tools (its final text), the turn limit, or the token cap.
 * With a checkpoint, its turn's tools not run yet run first (a paused turn's with the decisions):
 * no model call repeated; a checkpoint taken at a budget (no tool uses) goes straight on to the next call.
 */
async function runTurns(c: Conversation, resume?: AgentCheckpoint): Promise<TurnsEnd> {
  if (resume?.uses.length) {
    // Still undecided: the same pause again, nothing run (the job waits on).
    if (resume.awaiting.some((a) => !c.approval?.decisions?.has(a.index))) throw new ApprovalPause(resume);
    const decided = resume.awaiting.length ? resume.awaiting : undefined;
    const results = await runTools(c, resume.uses, decided, resume.results, resume.started);
    c.messages.push({ role: 'user', content: results });
    // Results the abort cut short ("not run: the job was aborted") would stand for approved
    // calls never made: the checkpoint keeps the decided turn, and the next start runs it again.
    if (c.signal?.aborted) throw new ModelCallError('model call aborted', 'aborted');
    await c.onResumedTurn?.({ ...checkpointOf(c), uses: [], awaiting: [] });
  }
  while (c.phaseTurns < c.spec.maxTurns) {
    warnNearCap(c);
    const req = requestOf(c);
    const maxTokens = maxOutput(c, req);
    if (maxTokens === null) return { stop: 'cap' };
    const res = withBoundedToolInputs(await callWithin(c, { ...req, max_tokens: maxTokens }));
    const uses = res.content.filter((b): b is ToolUseBlock => b.type === 'tool_use');
    const final = res.stop_reason !== 'tool_use' || uses.length === 0;
    if (final) stopIfBudgetCut(c, res);
    // Keep the history one the API accepts when it is sent again (a contract retry):
    // no blank text blocks, no empty assistant turn, and no tool_use left without its
    // tool_result (a final turn cut off by max_tokens mid tool call runs no tools).
    const kept = res.content.filter((b) =>
      b.type === 'text' ? b.text.trim() !== '' : !(final && b.type === 'tool_use'),
    );
    // Thinking alone is no turn: its answer (a tool call cut off) was dropped.
    if (kept.some((b) => b.type === 'text' || b.type === 'tool_use'))
      c.messages.push({ role: 'assistant', content: kept });
    // An answer the cap cut short is what the run has, not a finished answer.
    if (final && c.cap && res.stop_reason === 'max_tokens' && maxTokens < c.spec.maxTokens) return { stop: 'cap' };
    if (final) return { text: responseText(res), stopReason: res.stop_reason };
    // The last turn the limit allows asked for tools: no call would read their results, so
    // they are not run (nor put to a human for approval).
    if (c.phaseTurns >= c.spec.maxTurns) break;
    pauseIfGated(c, uses);
    c.messages.push({ role: 'user', content: await runTools(c, uses) });
  }
  return { stop: 'turns' };
}

/**
 * An answer cut at the output tokens the goal's budget could still grant (fewer than the call
 * asked for) is not an answer: text contracts would accept it whole. The budget ran out; the run
 * stops where a resume with a bigger budget asks that turn again.
 */
function stopIfBudgetCut(c: Conversation, res: ModelResponse): void {
  if (res.stop_reason !== 'max_tokens' || res.grantedMaxTokens === undefined) return;
  c.turns--;
  c.phaseTurns--;
  const reason = `token budget exceeded: the answer was cut at the ${res.grantedMaxTokens} output tokens left`;
  throw new BudgetRefused(new BudgetExceededError(reason, 'tokens'), { ...checkpointOf(c), uses: [], awaiting: [] });
}

/** The call's max output tokens: the role's, or less when the cap is near; null when no call fits. */
function maxOutput(c: Conversation, req: Omit<ModelRequest, 'max_tokens'>): number | null {
  if (!c.cap) return c.spec.maxTokens;
  const out = Math.min(c.spec.maxTokens, c.cap.limit - c.cap.used - inputOf(c, req));
  return out >= Math.min(c.spec.maxTokens, MIN_CALL_TOKENS) ? out : null;
}

function requestOf(c: Conversation): Omit<ModelRequest, 'max_tokens'> {
  return {
    model: c.spec.tier, // replaced by tier routing; a bare tier name fails loudly without it
    system: c.spec.systemPrompt,
    messages: [...c.messages],
    ...(c.tools.size ? { tools: [...c.tools.values()].map((t) => t.def) } : {}),
    ...(c.spec.thinking ? { thinking: thinkingParam(c.spec.thinking) } : {}),
    ...(c.spec.effort ? { effort: c.spec.effort } : {}),
  };
}

const thinkingParam = (t: ThinkingSpec): ThinkingParam =>
  t.type === 'enabled' ? { type: 'enabled', budget_tokens: t.budgetTokens } : t;

/**
 * Once, near the cap: the turn about to be sent tells the model to finish. Near means most of
 * the cap is used, or this call is likely the last that fits (another as big would not).
 */
function warnNearCap(c: Conversation): void {
  if (!c.cap || c.cap.warned) return;
  const input = inputOf(c, requestOf(c));
  const lastThatFits = c.cap.limit - c.cap.used - 2 * (input + MIN_CALL_TOKENS) < 0;
  if (c.cap.used < NEAR_CAP_SHARE * c.cap.limit && !lastThatFits) return;
  c.cap.warned = true;
  const notice = nearCapNotice(c.cap.used, c.cap.limit);
  const last = c.messages[c.messages.length - 1]!;
  const content = typeof last.content === 'string' ? `${last.content}\n\n${notice}` : [...last.content, text(notice)];
  c.messages[c.messages.length - 1] = { ...last, content };
}

const text = (t: string) => ({ type: 'text' as const, text: t });

/** A request's input tokens: characters / 4, scaled as the run's last call showed. */
function inputOf(c: Conversation, req: Omit<ModelRequest, 'max_tokens'>): number {
  return Math.ceil(estimateInputTokens(req) * c.inputRatio);
}

/**
 * One model call, counted against the run's cap. A call the goal's budget refuses costs
 * nothing and is not counted as a turn: the run stops with a checkpoint to go on from.
 */
async function callWithin(c: Conversation, req: ModelRequest): Promise<ModelResponse> {
  c.turns++;
  c.phaseTurns++;
  let res: ModelResponse;
  try {
    res = await c.call(req);
  } catch (err) {
    const refused = err instanceof BudgetExceededError;
    const retryable = err instanceof ProviderRateLimitError || (err instanceof ModelCallError && err.retryable);
    if (!refused && !retryable) throw err;
    // The call did nothing: not a turn. The run stops where it can go on from.
    c.turns--;
    c.phaseTurns--;
    const checkpoint = { ...checkpointOf(c), uses: [], awaiting: [] };
    if (refused) throw new BudgetRefused(err, checkpoint);
    beforeFailedCall.set(err as Error, checkpoint);
    throw err;
  }
  if (c.cap) c.cap.used += usageTotal(res.usage);
  const u = res.usage;
  const input = (u?.input_tokens ?? 0) + (u?.cache_read_input_tokens ?? 0) + (u?.cache_creation_input_tokens ?? 0);
  // Learned only where a cap uses it: estimating serialises the whole request.
  if (input > 0 && c.cap) c.inputRatio = Math.max(1, input / Math.max(1, estimateInputTokens(req)));
  return res;
}

function checkpointOf(c: Conversation): Omit<AgentCheckpoint, 'uses' | 'awaiting'> {
  const { turns, phaseTurns, contractRetry } = c;
  const cap = c.cap ? { tokensUsed: c.cap.used, capWarned: c.cap.warned } : {};
  return { messages: [...c.messages], turns, phaseTurns, contractRetry, ...cap };
}

/** No tool of a turn runs while one of its calls waits for a human: the run pauses before any. */
function pauseIfGated(c: Conversation, uses: ToolUseBlock[]): void {
  const gate = c.approval;
  if (!gate) return;
  const awaiting: AwaitingCall[] = [];
  for (const [index, use] of uses.entries()) {
    const tool = c.tools.get(use.name);
    // Gated by its own name, never by a bounded label a wildcard entry shares.
    const name = tool ? (tool.approvalName ?? tool.label ?? tool.def.name) : undefined;
    // A call whose input was refused is not run: nothing for a human to approve.
    if (name !== undefined && gate.needs(name) && !refusedInput(use)) awaiting.push({ index, tool: name });
  }
  if (!awaiting.length) return;
  throw new ApprovalPause({ ...checkpointOf(c), uses, awaiting });
}

/**
 * Runs each tool call, in order, from the first without a result in `done` (the calls an earlier
 * run of the job made; `started`: the one of them that had started, an at-most-once call whose
 * outcome is unknown). An unknown tool, bad input or a thrown error becomes an is_error result
 * naming the problem; every result is cut at maxChars with a marker. Each call is counted under
 * its configured tool name (`unknown` for a name the model made up), timed, and reported to
 * onToolCall with the checkpoint after it.
 */
async function runTools(
  c: Conversation,
  uses: ToolUseBlock[],
  decided?: AwaitingCall[],
  done: ToolResultBlock[] = [],
  started?: number,
): Promise<ToolResultBlock[]> {
  const results = [...done];
  const turn = { left: c.maxChars * TURN_RESULTS_SHARE - done.reduce((n, r) => n + r.content.length, 0) };
  const checkpoint = () => ({ ...checkpointOf(c), uses, awaiting: decided ?? [], results: [...results] });
  for (let i = done.length; i < uses.length; i++) {
    const use = uses[i]!;
    const tool = c.tools.get(use.name);
    const label = tool ? (tool.label ?? tool.def.name) : 'unknown';
    const refused = decided?.some((a) => a.index === i) ? refusal(c.approval?.decisions?.get(i)) : undefined;
    const badInput = refused ? undefined : refusedInput(use);
    // A turn's results past their share are not run (a decided call runs: a human approved it).
    const spent = !refused && !badInput && !decided && turn.left <= 0;
    const cutShort = !refused && !badInput && !spent && started === i && tool?.atMostOnce === true;
    const begun = performance.now();
    const result = refused
      ? refusedCall(c, use, refused)
      : badInput
        ? inputRefused(c, use, badInput)
        : spent
          ? turnFull(c, use)
          : cutShort
            ? unknownOutcome(c, use, label)
            : fitTurn(
                turn,
                tool ? await startTool(c, tool, use, () => ({ ...checkpoint(), started: i })) : unknownTool(c, use),
              );
    const ms = performance.now() - begun;
    const ok = !result.is_error;
    const status = refused ? 'refused' : spent || badInput ? 'not_run' : cutShort ? 'unknown' : ok ? 'ok' : 'error';
    c.metrics?.toolCalls.inc({ role: c.role, tool: label, status });
    if (tool && !refused && !badInput && !cutShort)
      c.metrics?.toolLatency.observe({ role: c.role, tool: label }, ms / 1000);
    results.push(result);
    // A call the abort cut short has no result to keep: a redelivery runs it again (an
    // at-most-once one, marked started, it reports as unknown instead).
    const call = { tool: label, ms: Math.round(ms), ok, ...(cutShort ? { unknown: true as const } : {}) };
    await c.onToolCall?.(call, c.signal?.aborted ? undefined : checkpoint());
  }
  return results;
}

/** Runs a call; an at-most-once tool's only once the checkpoint marking it started is stored. */
async function startTool(
  c: Conversation,
  tool: Tool,
  use: ToolUseBlock,
  startedAt: () => AgentCheckpoint,
): Promise<ToolResultBlock> {
  if (tool.atMostOnce && c.onToolStart) await c.onToolStart(startedAt());
  return runTool(c, tool, use);
}

/** An at-most-once call that had started when the run's process died: not run again. */
function unknownOutcome(c: Conversation, use: ToolUseBlock, label: string): ToolResultBlock {
  const content =
    `not run again: the run making this call stopped before it answered, so whether it took effect is unknown ` +
    `(${label} is not marked read-only or idempotent, so it is never run twice). Check its effect before ` +
    'calling it again.';
  return { type: 'tool_result', tool_use_id: use.id, content: truncate(content, c.maxChars), is_error: true };
}

/**
 * All of one turn's tool results together: this many times a result's own limit. Each result
 * goes into every later request of the run (and its checkpoint): a model asking for 100 files
 * at once would send megabytes per call.
 */
export const TURN_RESULTS_SHARE = 4;

/** Cuts a result to what is left of the turn's share (a call that ran keeps 1,000 chars at least). */
function fitTurn(turn: { left: number }, result: ToolResultBlock): ToolResultBlock {
  const text = result.content;
  const fitted = text.length > turn.left ? truncate(text, Math.max(1000, turn.left)) : text;
  turn.left -= text.length;
  return fitted === text ? result : { ...result, content: fitted };
}

function inputRefused(c: Conversation, use: ToolUseBlock, why: string): ToolResultBlock {
  const content = `error: not run: ${why}; send the call again with a flatter input`;
  return { type: 'tool_result', tool_use_id: use.id, content: truncate(content, c.maxChars), is_error: true };
}

function turnFull(c: Conversation, use: ToolUseBlock): ToolResultBlock {
  const limit = c.maxChars * TURN_RESULTS_SHARE;
  const content = `not run: this turn's tool results reached their limit (${limit} chars); ask for fewer at a time`;
  return { type: 'tool_result', tool_use_id: use.id, content, is_error: true };
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

function runTool(c: Conversation, tool: Tool, use: ToolUseBlock): Promise<ToolResultBlock> {
  const attrs = {
    'gen_ai.operation.name': 'execute_tool',
    'gen_ai.tool.name': tool.def.name,
    'gen_ai.tool.call.id': use.id,
    'deepq.tool': tool.label ?? tool.def.name,
    'deepq.role': c.role,
  };
  // Named by the tool that runs (a configured one), never by a name the model made up.
  return inSpan(`execute_tool ${tool.def.name}`, attrs, (span) => toolResult(c, tool, use, span));
}

async function toolResult(c: Conversation, tool: Tool, use: ToolUseBlock, span?: Span): Promise<ToolResultBlock> {
  // A lone surrogate (half an emoji cut off by a server, or in a file the model wrote) makes the
  // request invalid JSON to the Messages API: a 400 that fails the job. U+FFFD stands for it.
  try {
    const content = truncate((await tool.run(use.input)).toWellFormed(), c.maxChars);
    return { type: 'tool_result', tool_use_id: use.id, content };
  } catch (err) {
    // Another worker runs the job now: this run ends, rather than going on beside it.
    if (hasCode(err, ErrorCode.LockLost)) throw err;
    // The model sees the error as the tool's result; the trace marks the call failed.
    if (span) failSpan(span, err);
    const message = err instanceof Error ? err.message : String(err);
    const content = truncate(`error: ${message}`.toWellFormed(), c.maxChars);
    return { type: 'tool_result', tool_use_id: use.id, content, is_error: true };
  }
}
