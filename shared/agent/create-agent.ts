// One factory for every agent: planner, each subagent role, reflector (seed 003). Agents
// differ only in data: system prompt, tools, middleware, tier, limits, output contract.
// The loop (seed 004): a fresh message list, tool calls run and truncated, stop when the
// model stops calling tools or at maxTurns; only the final text returns.
import type { AgentSpec } from './roles.ts';
import type { Metrics } from '../runtime/metrics.ts';
import type { CallContext, Message, ModelProvider, ModelRequest, ModelResponse, ToolResultBlock, ToolUseBlock } from './providers/types.ts';
import { ModelCallError, responseText } from './providers/types.ts';
import { buildMiddleware, compose, type MiddlewareDeps } from './middleware/index.ts';
import type { OutputContract } from './output-contracts.ts';
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

export interface RunOptions {
  /** The whole task as one user message: instruction plus read_files contents. */
  task: string;
  tools?: Tool[];
  contract: OutputContract;
  ctx: Omit<CallContext, 'tier' | 'contract'>;
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
  const maxChars = deps.toolResultMaxChars ?? 50_000;

  async function callProvider(req: ModelRequest, ctx: CallContext): Promise<ModelResponse> {
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

  return {
    spec,
    async run<T>(opts: RunOptions): Promise<AgentRun<T>> {
      const ctx: CallContext = { ...opts.ctx, tier: spec.tier, contract: opts.contract.name };
      const call = compose(stack, ctx, (req) => callProvider(req, ctx));
      const tools = new Map((opts.tools ?? []).map((t) => [t.def.name, t]));
      // P52: the list starts fresh with the task alone; nothing from any other agent.
      const messages: Message[] = [{ role: 'user', content: opts.task }];
      let turns = 0;
      let contractRetries = 0;

      const loop = async (): Promise<string | null> => {
        for (let i = 0; i < spec.maxTurns; i++) {
          turns++;
          const res = await call({
            model: spec.tier, // replaced by tier routing; a bare tier name fails loudly without it
            system: spec.systemPrompt,
            messages: [...messages],
            ...(tools.size ? { tools: [...tools.values()].map((t) => t.def) } : {}),
            max_tokens: spec.maxTokens,
          });
          const uses = res.content.filter((b): b is ToolUseBlock => b.type === 'tool_use');
          const final = res.stop_reason !== 'tool_use' || uses.length === 0;
          // Keep the history one the API accepts when it is sent again (a contract retry):
          // no blank text blocks, no empty assistant turn, and no tool_use left without its
          // tool_result (a final turn cut off by max_tokens mid tool call runs no tools).
          const kept = res.content.filter((b) => (b.type === 'text' ? b.text.trim() !== '' : !(final && b.type === 'tool_use')));
          if (kept.length) messages.push({ role: 'assistant', content: kept });
          if (final) return responseText(res);
          const results: ToolResultBlock[] = [];
          for (const use of uses) {
            const tool = tools.get(use.name);
            if (!tool) {
              results.push({ type: 'tool_result', tool_use_id: use.id, content: `error: unknown tool ${JSON.stringify(use.name)} (available: ${[...tools.keys()].join(', ') || 'none'})`, is_error: true });
              continue;
            }
            try {
              results.push({ type: 'tool_result', tool_use_id: use.id, content: truncate(await tool.run(use.input), maxChars) });
            } catch (err) {
              results.push({ type: 'tool_result', tool_use_id: use.id, content: truncate(`error: ${(err as Error).message}`, maxChars), is_error: true });
            }
          }
          messages.push({ role: 'user', content: results });
        }
        return null;
      };

      let text = await loop();
      if (text === null) {
        return { ok: false, text: '', problem: `stopped at the turn limit (${spec.maxTurns}) without a final answer`, turns, contractRetries, messages };
      }
      let verdict = opts.contract.check(text);
      if (!verdict.ok) {
        // Reject and retry once with a reminder naming what was wrong (seed 000).
        contractRetries = 1;
        deps.metrics?.contractRejections.inc({ role: ctx.role, outcome: 'retried' });
        messages.push({
          role: 'user',
          content: `Your answer was rejected: ${verdict.problem}. Reply again with ONLY ${opts.contract.describe}.`,
        });
        text = await loop();
        if (text === null) {
          return { ok: false, text: '', problem: `stopped at the turn limit (${spec.maxTurns}) without a final answer`, turns, contractRetries, messages };
        }
        verdict = opts.contract.check(text);
        if (!verdict.ok) {
          deps.metrics?.contractRejections.inc({ role: ctx.role, outcome: 'failed' });
          return { ok: false, text, problem: `output broke the ${opts.contract.name} contract twice: ${verdict.problem}`, turns, contractRetries, messages };
        }
      }
      return { ok: true, text, value: verdict.value as T, turns, contractRetries, messages };
    },
  };
}
