// Commander argument parsers: a bad value fails the command, naming the flag and the rule.
import { InvalidArgumentError } from 'commander';

/** The longest `--max-seconds` (ten years): MAX_BUDGET_SECONDS in shared/goal/budgets.ts, which
 *  --help must not load. A time past a timer's range failed only after the goal was stored. */
export const MAX_SECONDS = 315_360_000;

/** Number() also reads hex, octal and binary (`0x10` is 16): a value must be written in decimal. */
const RADIX_PREFIX = /^\s*[-+]?0[xob]/i;

export function int(name: string, min = 1, max = Number.MAX_SAFE_INTEGER) {
  return (v: string) => {
    const n = RADIX_PREFIX.test(v) ? Number.NaN : Number(v);
    if (!Number.isInteger(n) || n < min) throw new InvalidArgumentError(`${name} must be an integer ≥ ${min}`);
    if (n > max) throw new InvalidArgumentError(`${name} must be at most ${max}`);
    return n;
  };
}

export function num(name: string, max = Number.POSITIVE_INFINITY) {
  return (v: string) => {
    const n = RADIX_PREFIX.test(v) ? Number.NaN : Number(v);
    if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError(`${name} must be a positive number`);
    if (n > max) throw new InvalidArgumentError(`${name} must be at most ${max}`);
    return n;
  };
}

/** A directory flag: an empty value is a mistake (an unset variable), not "no directory". */
export function dir(name: string) {
  return (v: string) => {
    if (v === '') throw new InvalidArgumentError(`${name} needs a directory (got an empty string)`);
    return v;
  };
}

/** `--on-budget`: what a goal does when a budget runs out. */
export function onBudget(v: string): 'end' | 'pause' {
  if (v !== 'end' && v !== 'pause') throw new InvalidArgumentError('--on-budget must be "pause" or "end"');
  return v;
}
