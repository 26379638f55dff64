// The CLI's number flags: a value out of range is refused naming the flag and the bound, before
// anything is stored; the time bound is the goal request's own.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { InvalidArgumentError } from 'commander';
import { int, MAX_SECONDS, num } from '../../cli/args.ts';
import { GoalRequestSchema } from '../../cli/goal-request.ts';
import { MAX_BUDGET_SECONDS } from '../../shared/goal/budgets.ts';

test('int and num refuse values past their bound, naming the flag', () => {
  assert.equal(int('--max-tokens')('5000'), 5000);
  assert.throws(() => int('--max-tokens')('1e300'), {
    name: InvalidArgumentError.name,
    message: '--max-tokens must be at most 9007199254740991',
  });
  assert.equal(num('--max-seconds', MAX_SECONDS)('3600.5'), 3600.5);
  assert.equal(num('--max-seconds', MAX_SECONDS)(String(MAX_SECONDS)), MAX_SECONDS);
  for (const v of ['1e306', String(MAX_SECONDS + 1)])
    assert.throws(() => num('--max-seconds', MAX_SECONDS)(v), {
      message: `--max-seconds must be at most ${MAX_SECONDS}`,
    });
});

test('num, like int, reads decimal only: 0x10 is not 16', () => {
  for (const v of ['0x10', '0o20', '0b10000', ' 0X10'])
    assert.throws(() => num('--max-seconds', MAX_SECONDS)(v), { message: '--max-seconds must be a positive number' });
  assert.equal(num('--redis-timeout')('10'), 10);
});

test('a goal request (any producer, not only the CLI) refuses a time budget past the bound', () => {
  assert.equal(MAX_SECONDS, MAX_BUDGET_SECONDS, 'the CLI and the schema bound differ');
  const ok = GoalRequestSchema.safeParse({ goal: 'g', budgets: { maxSeconds: MAX_BUDGET_SECONDS } });
  assert.equal(ok.success, true);
  const bad = GoalRequestSchema.safeParse({ goal: 'g', budgets: { maxSeconds: 1e306 } });
  assert.equal(bad.success, false);
  assert.match(String(bad.error?.issues[0]?.message), /at most 315360000 \(ten years\)/);
  assert.deepEqual(bad.error?.issues[0]?.path, ['budgets', 'maxSeconds']);
});
