// Prices and metric labels for the ids endpoints really return: a dated id is priced by the
// alias it was requested as (or, without one, by the documented date rule), an id with no
// price is "price unknown" (never $0), and the `model` metric label is a configured model
// or `other`.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { configuredModels, modelLabel, OTHER_MODEL } from '../../shared/agent/providers/model-labels.ts';
import { findPrice, type Price } from '../../shared/agent/providers/prices.ts';
import { costPerModel, estimateCost, formatCost, formatModelCost, knownCostUsd } from '../../shared/goal/cost.ts';
import type { GoalRecord, Usage } from '../../shared/goal/store.ts';

const SONNET: Price = { inputPerMTok: 3, outputPerMTok: 15, cacheReadPerMTok: 0.3, cacheWritePerMTok: 3.75 };
const LOCAL: Price = { inputPerMTok: 0.1, outputPerMTok: 0.2, cacheReadPerMTok: 0, cacheWritePerMTok: 0 };
const PRICES = { 'claude-sonnet-5-5': SONNET, 'local:qwen3:8b': LOCAL };

const usage = (input: number, output: number, cache_read = 0, cache_write = 0): Usage => ({
  input,
  output,
  cache_read,
  cache_write,
});

test('a price matches the reported id, then the id it was requested as, then the id without its date', () => {
  assert.deepEqual(findPrice(PRICES, 'claude-sonnet-5-5'), { price: SONNET, by: 'exact', key: 'claude-sonnet-5-5' });
  // The API answered the alias with a dated id: the alias it was asked for prices it.
  assert.equal(findPrice(PRICES, 'claude-sonnet-5-5-20250929', 'claude-sonnet-5-5')?.by, 'alias');
  // A gateway's own name for the model, requested under the configured one.
  assert.equal(findPrice(PRICES, 'local:qwen3-8b-q4_K_M', 'local:qwen3:8b')?.price, LOCAL);
  // No alias known (usage booked before aliases were recorded): the date rule.
  for (const dated of ['claude-sonnet-5-5-20250929', 'claude-sonnet-5-5-2025-09-29', 'claude-sonnet-5-5@20250929'])
    assert.deepEqual(findPrice(PRICES, dated), { price: SONNET, by: 'dated', key: 'claude-sonnet-5-5' }, dated);
  // Only a date is stripped, and only at the end: a different model is not priced as its prefix.
  assert.equal(findPrice(PRICES, 'claude-sonnet-5-5-turbo'), undefined);
  assert.equal(findPrice(PRICES, 'claude-sonnet-5-5-2025'), undefined);
  assert.equal(findPrice(PRICES, 'claude-sonnet-5'), undefined);
});

test('anthropic:<id> and <id> are one model, in price keys and in ids', () => {
  const prices = { 'anthropic:claude-haiku-5-5': LOCAL };
  assert.equal(findPrice(prices, 'claude-haiku-5-5')?.price, LOCAL);
  assert.equal(findPrice(PRICES, 'anthropic:claude-sonnet-5-5')?.price, SONNET);
  // Another provider's model of the same id is another model.
  assert.equal(findPrice(PRICES, 'other:claude-sonnet-5-5'), undefined);
});

test('a goal with an unpriced model says "price unknown", never $0; priced ones are summed', () => {
  const goal: Pick<GoalRecord, 'usage' | 'requestedAs'> = {
    usage: {
      'planner|claude-sonnet-5-5-20250929': usage(1_000_000, 100_000, 2_000_000, 1_000_000),
      'critic|local:mystery-7b': usage(500, 50),
      'research|local:qwen3:8b': usage(10_000_000, 0),
    },
    requestedAs: { 'claude-sonnet-5-5-20250929': 'claude-sonnet-5-5' },
  };
  const c = estimateCost(goal, PRICES);
  // 3 + 1.5 + 0.6 + 3.75 for the planner, 1.00 for research.
  assert.equal(c.usd.toFixed(4), '9.8500');
  assert.deepEqual(c.unpriced, ['local:mystery-7b']);
  assert.equal(knownCostUsd(c), null);
  assert.equal(formatCost(c), '$9.8500 + price unknown');
  assert.equal(formatCost(c, { approx: true, models: true }), '~$9.8500 + price unknown (local:mystery-7b)');
  const none = estimateCost({ usage: { 'critic|local:mystery-7b': usage(5, 5) }, requestedAs: {} }, PRICES);
  assert.equal(formatCost(none), 'price unknown');
  assert.equal(knownCostUsd(none), null);
  // The scripted model's ids are free whatever the table says; an empty goal costs nothing.
  const scripted = estimateCost({ usage: { 'critic|scripted-low': usage(5, 5) }, requestedAs: {} }, {});
  assert.equal(formatCost(scripted, { approx: true }), '~$0.0000');
  assert.equal(knownCostUsd(estimateCost({ usage: {}, requestedAs: {} }, {})), 0);
});

test('cost per model: tokens summed over roles, priced by alias, unknown as null, estimated flagged', () => {
  const goal = {
    usage: {
      'planner|claude-sonnet-5-5-20250929': usage(1_000_000, 100_000),
      'code-writer|claude-sonnet-5-5-20250929': usage(0, 100_000, 2_000_000, 1_000_000),
      'critic|local:mystery-7b': usage(500, 50),
    },
    requestedAs: { 'claude-sonnet-5-5-20250929': 'claude-sonnet-5-5' },
    estimatedUsage: ['critic|local:mystery-7b'],
  };
  const rows = costPerModel(goal, PRICES);
  assert.deepEqual(rows, [
    // 3 + 3 (output 200k) + 0.6 + 3.75
    {
      model: 'claude-sonnet-5-5-20250929',
      tokens: usage(1_000_000, 200_000, 2_000_000, 1_000_000),
      costUsd: 10.35,
      estimated: false,
    },
    { model: 'local:mystery-7b', tokens: usage(500, 50), costUsd: null, estimated: true },
  ]);
  assert.deepEqual(rows.map(formatModelCost), ['~$10.3500', 'price unknown (estimated)']);
  // The total is the same rows' sum, the unpriced model listed, never $0.
  const c = estimateCost(goal, PRICES);
  assert.deepEqual([c.usd, c.priced, c.unpriced], [10.35, 1, ['local:mystery-7b']]);
});

test('a cost carries no float noise: 1 + 7 tokens, 1 + 7 cached, at $3/$15/$0.3/$3.75 is $0.00013455', () => {
  // Summed in floating point it was 0.00013455000000000002, and `status --json` said so.
  const goal = { usage: { 'critic|claude-sonnet-5-5': usage(1, 7, 1, 7) }, requestedAs: {} };
  assert.equal(costPerModel(goal, PRICES)[0]!.costUsd, 0.00013455);
  assert.equal(String(estimateCost(goal, PRICES).usd), '0.00013455');
});

test('the model label is a configured model, its dated form as it, and anything else `other`', () => {
  const configured = configuredModels({
    models: { HIGH: 'anthropic:claude-sonnet-5-5', LOW: 'local:qwen3:8b' },
    roles: [{ model: 'local:critic-1' }, {}],
    planner: {},
    reflector: { model: 'claude-haiku-5-5' },
  });
  assert.deepEqual([...configured].sort(), [
    'claude-haiku-5-5',
    'claude-sonnet-5-5',
    'local:critic-1',
    'local:qwen3:8b',
  ]);
  assert.equal(
    modelLabel(configured, 'anthropic:claude-sonnet-5-5', 'claude-sonnet-5-5-20250929'),
    'claude-sonnet-5-5',
  );
  assert.equal(modelLabel(configured, 'local:qwen3:8b', 'local:qwen3:8b'), 'local:qwen3:8b');
  assert.equal(modelLabel(configured, 'local:qwen3:8b'), 'local:qwen3:8b');
  // A gateway that answers with an id nobody configured: `other`, however many such ids.
  assert.equal(modelLabel(configured, 'local:qwen3:8b', 'local:qwen3-8b-instruct-q4_K_M'), OTHER_MODEL);
  assert.equal(modelLabel(configured, 'local:critic-1', 'local:random-4711'), OTHER_MODEL);
  // A request for a model that is not configured (a tier name without tier routing, say).
  assert.equal(modelLabel(configured, 'LOW'), OTHER_MODEL);
  assert.equal(modelLabel(configured, 'LOW', 'LOW-20250101'), OTHER_MODEL);
  // A configured id returned for another configured request is labelled as itself.
  assert.equal(modelLabel(configured, 'local:critic-1', 'claude-haiku-5-5'), 'claude-haiku-5-5');
});
