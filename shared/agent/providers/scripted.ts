// A deterministic offline model. It writes contract-valid output for every role, so the
// demo, tests and benchmarks run without a key: cycle 1 plans research and code, cycle 2 a
// critique of the code, then the reflector ends the goal. It is not an LLM and says so.
import { setTimeout as sleep } from 'node:timers/promises';
import type { RoleSpec } from '../roles.ts';
import {
  ModelCallError, type CallContext, type Message, type ModelProvider, type ModelRequest, type ModelResponse,
} from './types.ts';

export interface ScriptedOptions {
  latencyMs: number;
  /** When > 0, the first plan is this many research subtasks (for fan-out benchmarks). */
  fanout?: number;
  roles: Pick<RoleSpec, 'name' | 'contract'>[];
}

function lastUserText(messages: Message[]): string {
  const first = messages[0];
  if (!first) return '';
  return typeof first.content === 'string'
    ? first.content
    : first.content.map((b) => (b.type === 'text' ? b.text : '')).join('');
}

/** Reads "Current files:" lines of the planner/reflector message: names of live files. */
function liveFiles(text: string): string[] {
  return [...text.matchAll(/^- (\S+) \[(active|done|failed),/gm)].map((m) => m[1]!);
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
    const task = lastUserText(req.messages);
    const firstTurn = req.messages.length === 1;
    const wantsTools = req.tools?.some((t) => t.name === 'list_files');
    if (ctx.contract === 'code' && firstTurn && wantsTools) {
      // Exercise the tool loop: look at the files first, as a real model would.
      return this.reply(req, [{ type: 'tool_use', id: `toolu_${hash(task).toString(16)}`, name: 'list_files', input: {} }], 'tool_use');
    }
    return this.reply(req, [{ type: 'text', text: this.answer(ctx.contract, task) }], 'end_turn');
  }

  private answer(contract: string, task: string): string {
    switch (contract) {
      case 'plan':
        return JSON.stringify(this.plan(task));
      case 'reflection': {
        const critic = this.roleFor('critique');
        const planLine = /^Plan: (.*)$/m.exec(task)?.[1] ?? '';
        const reviewed = critic !== undefined && planLine.includes(`"role":"${critic}"`);
        return JSON.stringify(
          reviewed
            ? { decision: 'end', reason: 'the code was written and reviewed; the goal is met' }
            : { decision: 'continue', reason: 'the code exists but has not been reviewed yet' },
        );
      }
      case 'summary': {
        const topic = (/## Task\n([\s\S]*)$/.exec(task)?.[1] ?? task).trim().split('\n')[0]!.slice(0, 160);
        return `Summary (scripted model): ${topic}\n\n- Key fact 1 about the topic [1]\n- Key fact 2 about the topic [2]\n\n[1] scripted source A\n[2] scripted source B`;
      }
      case 'code': {
        const topic = (/## Task\n([\s\S]*)$/.exec(task)?.[1] ?? task).trim().split('\n')[0]!.replace(/[^\w .,-]/g, '').slice(0, 120);
        return `\`\`\`python\n# ${topic}\ndef solve(values):\n    """Scripted solution (deterministic offline model)."""\n    return sorted(values)\n\n\nif __name__ == "__main__":\n    print(solve([3, 1, 2]))\n\`\`\``;
      }
      case 'critique':
        return JSON.stringify([
          { line: 3, issue: 'no input validation for non-list values', severity: 'medium' },
          { line: 5, issue: 'missing tests for empty input', severity: 'low' },
        ]);
      default:
        return `Done: ${task.slice(0, 200)}`;
    }
  }

  private plan(task: string) {
    const research = this.roleFor('summary');
    const coder = this.roleFor('code');
    const critic = this.roleFor('critique');
    const goal = (/^Goal: (.*)$/m.exec(task)?.[1] ?? 'the goal').slice(0, 300);
    const files = liveFiles(task);
    const priorPlan = /^Prior plan: (.*)$/m.exec(task)?.[1] ?? '(none)';
    const subtasks: { role: string; instruction: string; expected_artifact: string; read_files: string[] }[] = [];
    if (priorPlan === '(none)' && this.opts.fanout && research) {
      for (let i = 1; i <= this.opts.fanout; i++) subtasks.push({ role: research, instruction: `Research part ${i} of: ${goal}`, expected_artifact: `research-${i}.md`, read_files: [] });
    } else if (priorPlan === '(none)' || !files.includes('solution.py')) {
      if (research) subtasks.push({ role: research, instruction: `Research the background for: ${goal}`, expected_artifact: 'research.md', read_files: [] });
      if (coder) subtasks.push({ role: coder, instruction: `Write code for: ${goal}`, expected_artifact: 'solution.py', read_files: [] });
    } else if (critic && !priorPlan.includes(`"role":"${critic}"`)) {
      subtasks.push({ role: critic, instruction: `Review the code against the goal: ${goal}`, expected_artifact: 'critique.json', read_files: ['solution.py'] });
    } else if (coder) {
      const reads = ['solution.py', ...(files.includes('critique.json') ? ['critique.json'] : [])];
      subtasks.push({ role: coder, instruction: `Revise the code for: ${goal}, addressing the critique`, expected_artifact: 'solution.py', read_files: reads });
    }
    if (subtasks.length === 0) subtasks.push({ role: this.opts.roles[0]!.name, instruction: `Work on: ${goal}`, expected_artifact: 'notes.md', read_files: [] });
    return { subtasks };
  }

  private reply(req: ModelRequest, content: ModelResponse['content'], stop: string): ModelResponse {
    const inChars = JSON.stringify(req.system).length + JSON.stringify(req.messages).length;
    const outChars = JSON.stringify(content).length;
    return {
      model: req.model,
      content,
      stop_reason: stop,
      usage: { input_tokens: Math.ceil(inChars / 4), output_tokens: Math.ceil(outChars / 4), cache_read_input_tokens: 0, cache_creation_input_tokens: 0 },
    };
  }
}
