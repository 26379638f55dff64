// A deterministic offline model. It writes contract-valid output for every role, so the
// demo, tests and benchmarks run without a key: cycle 1 plans research and code, cycle 2 a
// critique of the code, then the reflector ends the goal. It is not an LLM and says so.
import { setTimeout as sleep } from 'node:timers/promises';
import { MIN_TOKEN_CAP } from '../../goal/plan.ts';
import type { RoleSpec } from '../roles.ts';
import {
  type CallContext,
  type CallSubject,
  ModelCallError,
  type ModelProvider,
  type ModelRequest,
  type ModelResponse,
} from './types.ts';

interface Subtask {
  role: string;
  instruction: string;
  expected_artifact: string;
  read_files: string[];
  token_cap?: number;
}

export interface ScriptedOptions {
  latencyMs: number;
  /** When > 0, the first plan is this many research subtasks (for fan-out benchmarks). */
  fanout?: number;
  roles: Pick<RoleSpec, 'name' | 'contract'>[];
}

/**
 * A cap below which the scripted planner gives none: a call of a default role needs ~700-1000
 * tokens of input alone (its prompt and tools), which the plan contract checks.
 */
const SCRIPTED_MIN_CAP = 1500;

/** An equal share of the tokens left for each subtask (one share kept for the reflection), when it is worth a call. */
function withCaps(subtasks: Subtask[], tokensLeft: number | undefined): Subtask[] {
  if (tokensLeft === undefined) return subtasks;
  const cap = Math.floor(tokensLeft / (subtasks.length + 1));
  return cap >= Math.max(MIN_TOKEN_CAP, SCRIPTED_MIN_CAP) ? subtasks.map((t) => ({ ...t, token_cap: cap })) : subtasks;
}

function hash(s: string): number {
  let h = 2166136261;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619);
  return h >>> 0;
}

export class ScriptedProvider implements ModelProvider {
  readonly name = 'scripted' as const;
  constructor(private readonly opts: ScriptedOptions) {}

  private roleFor(contract: string): string | undefined {
    return this.opts.roles.find((r) => r.contract === contract)?.name;
  }

  async createMessage(req: ModelRequest, ctx: CallContext): Promise<ModelResponse> {
    if (this.opts.latencyMs > 0) {
      try {
        await sleep(this.opts.latencyMs, undefined, { signal: ctx.signal });
      } catch {
        throw new ModelCallError('model call aborted', 'aborted');
      }
    }
    if (ctx.signal?.aborted) throw new ModelCallError('model call aborted', 'aborted');
    const subject = ctx.subject ?? { goal: 'the goal' };
    const firstTurn = req.messages.length === 1;
    const wantsTools = req.tools?.some((t) => t.name === 'list_files');
    if (ctx.contract === 'code' && firstTurn && wantsTools) {
      // Exercise the tool loop: look at the files first, as a real model would.
      const id = `toolu_${hash(subject.instruction ?? subject.goal).toString(16)}`;
      return this.reply(req, [{ type: 'tool_use', id, name: 'list_files', input: {} }], 'tool_use');
    }
    return this.reply(req, [{ type: 'text', text: this.answer(ctx.contract, subject) }], 'end_turn');
  }

  private answer(contract: string, subject: CallSubject): string {
    const topic = (subject.instruction ?? subject.goal).trim().split('\n')[0]!;
    switch (contract) {
      case 'plan':
        return JSON.stringify(this.plan(subject));
      case 'reflection':
        return JSON.stringify(
          this.reviewed(subject.plan)
            ? { decision: 'end', reason: 'the code was written and reviewed; the goal is met' }
            : { decision: 'continue', reason: 'the code exists but has not been reviewed yet' },
        );
      case 'summary':
        return (
          `Summary (scripted model): ${topic.slice(0, 160)}\n\n- Key fact 1 about the topic [1]\n` +
          '- Key fact 2 about the topic [2]\n\n[1] scripted source A\n[2] scripted source B'
        );
      case 'code': {
        const title = topic.replace(/[^\w .,-]/g, '').slice(0, 120);
        return (
          `\`\`\`python\n# ${title}\ndef solve(values):\n    """Scripted solution (deterministic offline model)."""\n` +
          '    return sorted(values)\n\n\nif __name__ == "__main__":\n    print(solve([3, 1, 2]))\n```'
        );
      }
      case 'critique':
        return JSON.stringify([
          { line: 3, issue: 'no input validation for non-list values', severity: 'medium' },
          { line: 5, issue: 'missing tests for empty input', severity: 'low' },
        ]);
      default:
        return `Done: ${(subject.instruction ?? subject.goal).slice(0, 200)}`;
    }
  }

  /** Whether a plan already had the critic review the code. */
  private reviewed(plan: CallSubject['plan']): boolean {
    const critic = this.roleFor('critique');
    return critic !== undefined && !!plan?.subtasks.some((t) => t.role === critic);
  }

  /**
   * Plans only what is missing: finished (done) artifacts are kept, as the plan contract asks.
   * With a token budget each subtask gets an equal share of what is left as its token cap.
   */
  private plan(subject: CallSubject): { subtasks: Subtask[] } {
    const goal = subject.goal.split('\n')[0]!.slice(0, 300);
    const files = subject.files ?? [];
    const done = new Set(subject.done ?? []);
    const missing = (name: string) => !done.has(name);
    const research = this.roleFor('summary');
    const coder = this.roleFor('code');
    const critic = this.roleFor('critique');
    const task = (role: string, instruction: string, artifact: string, reads: string[] = []): Subtask => ({
      role,
      instruction,
      expected_artifact: artifact,
      read_files: reads,
    });
    const subtasks: Subtask[] = [];
    if (!subject.plan && this.opts.fanout && research) {
      for (let i = 1; i <= this.opts.fanout; i++) {
        const name = `research-${i}.md`;
        if (missing(name)) subtasks.push(task(research, `Research part ${i} of: ${goal}`, name));
      }
    } else if ((research && missing('research.md')) || (coder && missing('solution.py'))) {
      // The files the goal came with are what both read.
      const inputs = subject.inputs ?? [];
      if (research && missing('research.md'))
        subtasks.push(task(research, `Research the background for: ${goal}`, 'research.md', inputs));
      if (coder && missing('solution.py')) subtasks.push(task(coder, `Write code for: ${goal}`, 'solution.py', inputs));
    } else if (critic && !this.reviewed(subject.plan) && missing('critique.json')) {
      const reads = ['solution.py', ...(subject.inputs ?? [])];
      subtasks.push(task(critic, `Review the code against the goal: ${goal}`, 'critique.json', reads));
    } else if (coder && subject.revise?.includes('solution.py')) {
      const reads = ['solution.py', ...(files.includes('critique.json') ? ['critique.json'] : [])];
      subtasks.push(task(coder, `Revise the code for: ${goal}, addressing the critique`, 'solution.py', reads));
    }
    if (subtasks.length === 0) {
      const notes = ['notes.md', 'notes-2.md', 'notes-3.md', 'notes-4.md', 'notes-5.md'].find(missing) ?? 'notes-6.md';
      subtasks.push(task(this.opts.roles[0]!.name, `Work on: ${goal}`, notes));
    }
    return { subtasks: withCaps(subtasks, subject.tokensLeft) };
  }

  private reply(req: ModelRequest, content: ModelResponse['content'], stop: string): ModelResponse {
    const inChars = JSON.stringify(req.system).length + JSON.stringify(req.messages).length;
    const outChars = JSON.stringify(content).length;
    return {
      model: req.model,
      content,
      stop_reason: stop,
      usage: {
        input_tokens: Math.ceil(inChars / 4),
        output_tokens: Math.ceil(outChars / 4),
        cache_read_input_tokens: 0,
        cache_creation_input_tokens: 0,
      },
    };
  }
}
