// Commander argument parsers: a bad value fails the command, naming the flag and the rule.
import { InvalidArgumentError } from 'commander';

export function int(name: string, min = 1) {
  return (v: string) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < min) throw new InvalidArgumentError(`${name} must be an integer ≥ ${min}`);
    return n;
  };
}

export function num(name: string, max = Number.POSITIVE_INFINITY) {
  return (v: string) => {
    const n = Number(v);
    if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError(`${name} must be a positive number`);
    if (n > max) throw new InvalidArgumentError(`${name} must be at most ${max}`);
    return n;
  };
}

/** `--on-budget`: what a goal does when a budget runs out. */
export function onBudget(v: string): 'end' | 'pause' {
  if (v !== 'end' && v !== 'pause') throw new InvalidArgumentError('--on-budget must be "pause" or "end"');
  return v;
}
