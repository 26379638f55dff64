// The vfs soak's memory drift: what the sweep left of the soak's own growth of used_memory,
// not of everything in Redis before it.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { memoryDrift } from '../../bench/vfs.ts';

const close = (actual: number, expected: number) =>
  assert.ok(Math.abs(actual - expected) < 1e-6, `${actual} is not ${expected}`);

test("the soak's memory drift is what the sweep left of the soak's own growth", () => {
  // 280 MB of earlier data, 45 MB added by the soak, 9 MB of it left after the sweep: 20 %,
  // where dividing by everything before would say 3 %.
  const before = 280e6;
  close(memoryDrift({ before, afterRun: before + 45e6, afterSweep: before + 9e6 }), 0.2);
  close(memoryDrift({ before, afterRun: before + 45e6, afterSweep: before - 1e6 }), -1 / 45);
  assert.throws(
    () => memoryDrift({ before, afterRun: before, afterSweep: before }),
    /the soak did not grow used_memory/,
  );
});
