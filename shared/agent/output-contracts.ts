// Handoff contracts (seed 000): what each role's final text must be. A broken contract is
// rejected with a problem statement the agent turns into a reminder.
import { z } from 'zod';
import { extractJson, formatZodIssues } from '../zod.ts';
import type { RoleContract } from './roles.ts';

export type ContractResult<T = unknown> = { ok: true; value: T } | { ok: false; problem: string };
export type OutputContract<T = unknown> = {
  name: string;
  describe: string;
  check(text: string): ContractResult<T>;
  /** The artifact an accepted answer is stored as, when not the answer's text itself. */
  artifact?(value: T): string;
};

const CritiqueSchema = z.array(
  z.object({ line: z.number().int(), issue: z.string().min(1), severity: z.string().min(1) }),
);

/** A contract for JSON output: bare or fenced JSON that the schema accepts. */
export function jsonContract<T>(name: string, describe: string, schema: z.ZodType<T>): OutputContract<T> {
  return { name, describe, check: (text) => json(text, schema, name) };
}

function json<T>(text: string, schema: z.ZodType<T>, what: string): ContractResult<T> {
  let data: unknown;
  try {
    data = extractJson(text);
  } catch (err) {
    return { ok: false, problem: (err as Error).message.replace(/^invalid .*?: /, '') };
  }
  const r = schema.safeParse(data);
  return r.success
    ? { ok: true, value: r.data }
    : { ok: false, problem: `${what} does not match its schema: ${formatZodIssues(r.error)}` };
}

export const summaryContract: OutputContract<string> = {
  name: 'summary',
  describe: 'a non-empty plain-text summary',
  check: (text) =>
    text.trim().length > 0 ? { ok: true, value: text.trim() } : { ok: false, problem: 'the summary is empty' },
};

export const codeContract: OutputContract<string> = {
  name: 'code',
  describe: 'exactly one fenced code block (```lang ... ```) and nothing else',
  check(text) {
    const t = text.trim();
    const fences = t.match(/^```/gm)?.length ?? 0;
    if (fences !== 2)
      return {
        ok: false,
        problem:
          'expected exactly one fenced code block, ' +
          `found ${Math.floor(fences / 2)} block(s) (${fences} fence lines)`,
      };
    // Any info string on the opening fence (```c#, ```js title="a.js"): the language is not checked.
    const block = /^```[^\n`]*\n([\s\S]*)\n```$/.exec(t);
    if (!block) return { ok: false, problem: 'text outside the fenced code block' };
    return { ok: true, value: block[1]! };
  },
  // The code itself, runnable as the file it is stored as (a fence line would be a syntax error).
  artifact: (code) => `${code}\n`,
};

export const critiqueContract: OutputContract<z.infer<typeof CritiqueSchema>> = {
  name: 'critique',
  describe: 'a JSON array of {"line": int, "issue": str, "severity": str}',
  check: (text) => json(text, CritiqueSchema, 'critique'),
};

export const textContract: OutputContract<string> = {
  name: 'text',
  describe: 'any non-empty text',
  check: (text) => (text.trim() ? { ok: true, value: text } : { ok: false, problem: 'the answer is empty' }),
};

const ROLE_CONTRACTS: Record<RoleContract, OutputContract> = {
  summary: summaryContract,
  code: codeContract,
  critique: critiqueContract,
  text: textContract,
};

/** A subagent role's contract by name (the planner and reflector bring their own). */
/** An answer as a subtask's artifact holds it: the contract's artifact of an accepted one, else the text. */
export function artifactOfAnswer(contract: OutputContract, answer: string): string {
  const verdict = contract.check(answer);
  return verdict.ok && contract.artifact ? contract.artifact(verdict.value) : answer;
}

export function contractFor(name: RoleContract): OutputContract {
  return ROLE_CONTRACTS[name];
}
