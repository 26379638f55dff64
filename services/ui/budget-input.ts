// Budget figures typed into the inspector's forms (the enqueue form, a budget pause's raise):
// empty means absent; anything else must be a positive number, whole for tokens and cycles,
// as the CLI's flags require. The browser's own checks are a convenience: these are the rule.
import type { RaisedBudgets } from '../../cli/goal-client.ts';
import { ValidationError } from '../../shared/errors.ts';

export function budgetNumber(name: string, raw: unknown, integer: boolean): number | undefined {
  if (typeof raw !== 'string' || !raw.trim()) return undefined;
  const n = Number(raw.trim());
  if (Number.isFinite(n) && n > 0 && n <= Number.MAX_SAFE_INTEGER && (!integer || Number.isInteger(n))) return n;
  const what = integer ? 'a whole number ≥ 1' : 'a positive number';
  throw new ValidationError(`${name} must be ${what}, not ${JSON.stringify(raw.trim().slice(0, 40))}`);
}

/** The form fields of a raise, named like the enqueue form's; labels name the CLI flags. */
export function raiseFromForm(body: Record<string, unknown>): RaisedBudgets {
  return {
    maxTokens: budgetNumber('max tokens (--max-tokens)', body.maxTokens, true),
    maxSteps: budgetNumber('max cycles (--max-steps)', body.maxSteps, true),
    maxSeconds: budgetNumber('more seconds (--max-seconds)', body.maxSeconds, false),
  };
}
