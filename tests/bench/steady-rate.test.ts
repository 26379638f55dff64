// The closed loop's steady rate, on synthetic completion times: it leaves out the pipeline's
// fill and the drain once the loop stops starting goals.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { steadyRate } from '../../bench/common.ts';

const close = (actual: number, expected: number) =>
  assert.ok(Math.abs(actual - expected) < 1e-6, `${actual} is not ${expected}`);

/**
 * Completion times (ms) of a closed loop of `n` goals, `inFlight` at a time: a burst of `fill`
 * completions at 0, then one every `steadyMs` while the loop is full (up to completion
 * n - inFlight + 1), then the drain, one every `drainMs` as the loop empties.
 */
function loop(n: number, inFlight: number, fill: number, steadyMs: number, drainMs: number): number[] {
  const lastFull = n - inFlight; // index of the last completion the full loop made
  return Array.from({ length: n }, (_, i) => {
    if (i < fill) return 0;
    if (i <= lastFull) return (i - fill + 1) * steadyMs;
    return (lastFull - fill + 1) * steadyMs + (i - lastFull) * drainMs;
  });
}

test('the steady rate of 200 goals at 64 in flight leaves the drain out', () => {
  // 100 goals/s while full; the last 63 completions trickle in at 25/s as the loop empties.
  const t = loop(200, 64, 20, 10, 40);
  close(steadyRate(t, 64), 100);
  // The order the completions were seen in does not matter.
  close(steadyRate([...t].reverse(), 64), 100);
});

test('with one goal in flight there is no drain: all but the fill counts', () => {
  const t = Array.from({ length: 40 }, (_, i) => i * 250);
  close(steadyRate(t, 1), 4);
  // A last completion slower than the rest is part of the steady stretch at 1 in flight.
  const slowLast = [...t.slice(0, -1), t.at(-2)! + 2750];
  close(steadyRate(slowLast, 1), (39 - 4) / ((slowLast[39]! - slowLast[4]!) / 1000));
});

test('a batch no longer than the loop has no steady stretch: its middle 80 %', () => {
  const t = Array.from({ length: 60 }, (_, i) => i * 10);
  close(steadyRate(t, 64), 100);
});
