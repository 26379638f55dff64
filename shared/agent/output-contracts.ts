// Handoff contracts (seed 000): what each role's final text must be. A broken contract is
// rejected with a problem statement the agent turns into a reminder.
import { z } from 'zod';
import { extractJson, planSchemaFor, ReflectionSchema, type Plan, type Reflection } from '../contracts.ts';
import { formatZodIssues } from '../runtime/config.ts';
import type { CONTRACT_NAMES } from './roles.ts';

export type ContractResult<T = unknown> = { ok: true; value: T } | { ok: false; problem: string };
export type OutputContract<T = unknown> = { name: string; describe: string; check(text: string): ContractResult<T> };

const CritiqueSchema = z.array(z.object({ line: z.number().int(), issue: z.string().min(1), severity: z.string().min(1) }));

function json<T>(text: string, schema: z.ZodType<T>, what: string): ContractResult<T> {
  let data: unknown;
  try {
    data = extractJson(text);
  } catch (err) {
    return { ok: false, problem: (err as Error).message.replace(/^invalid .*?: /, '') };
  }
  const r = schema.safeParse(data);
  return r.success ? { ok: true, value: r.data } : { ok: false, problem: `${what} does not match its schema: ${formatZodIssues(r.error)}` };
}

export const summaryContract: OutputContract<string> = {
  name: 'summary',
  describe: 'a non-empty plain-text summary',
  check: (text) => (text.trim().length > 0 ? { ok: true, value: text.trim() } : { ok: false, problem: 'the summary is empty' }),
};

export const codeContract: OutputContract<string> = {
  name: 'code',
  describe: 'exactly one fenced code block (```lang ... ```) and nothing else',
  check(text) {
    const t = text.trim();
    const fences = t.match(/^```/gm)?.length ?? 0;
    if (fences !== 2) return { ok: false, problem: `expected exactly one fenced code block, found ${Math.floor(fences / 2)} block(s) (${fences} fence lines)` };
    if (!/^```[\w+-]*\n[\s\S]*\n```$/.test(t)) return { ok: false, problem: 'text outside the fenced code block' };
    return { ok: true, value: t };
  },
};

export const critiqueContract: OutputContract<z.infer<typeof CritiqueSchema>> = {
  name: 'critique',
  describe: 'a JSON array of {"line": int, "issue": str, "severity": str}',
  check: (text) => json(text, CritiqueSchema, 'critique'),
};

export const reflectionContract: OutputContract<Reflection> = {
  name: 'reflection',
  describe: 'JSON {"decision": "continue"|"replan"|"end"|"escalate", "reason": str}',
  check: (text) => json(text, ReflectionSchema, 'reflection'),
};

export function planContract(roles: string[], files: string[]): OutputContract<Plan> {
  const schema = planSchemaFor(roles, files);
  return {
    name: 'plan',
    describe: 'JSON {"subtasks": [{"role", "instruction", "expected_artifact", "read_files"}]} with 1-5 subtasks, known roles, unique artifact names, and read_files naming existing files',
    check: (text) => json(text, schema as z.ZodType<Plan>, 'plan'),
  };
}

export const textContract: OutputContract<string> = {
  name: 'text',
  describe: 'any non-empty text',
  check: (text) => (text.trim() ? { ok: true, value: text } : { ok: false, problem: 'the answer is empty' }),
};

export function contractFor(name: (typeof CONTRACT_NAMES)[number], ctx: { roles?: string[]; files?: string[] } = {}): OutputContract {
  switch (name) {
    case 'summary': return summaryContract;
    case 'code': return codeContract;
    case 'critique': return critiqueContract;
    case 'reflection': return reflectionContract;
    case 'plan': return planContract(ctx.roles ?? [], ctx.files ?? []);
    case 'text': return textContract;
  }
}
