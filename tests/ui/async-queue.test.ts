import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AsyncQueue } from '../../services/ui/async-queue.ts';

/** A queue of batches bounded at 4 items, and whether it overflowed. */
function boundedAtFour() {
  const state = { overflowed: false };
  const queue = new AsyncQueue<number[]>(
    4,
    () => {
      state.overflowed = true;
    },
    (b) => b.length,
  );
  return { queue, state, pulled: queue[Symbol.asyncIterator]() };
}

test('an item the consumer is still working on counts toward the bound', async () => {
  const { queue, state, pulled } = boundedAtFour();
  queue.push([1, 2, 3]);
  // The consumer took the batch and is stuck writing it (a client that stopped reading).
  assert.deepEqual((await pulled.next()).value, [1, 2, 3]);
  queue.push([4]);
  assert.equal(state.overflowed, false);
  queue.push([5]);
  assert.equal(state.overflowed, true, 'three in hand plus two waiting is past four');
  assert.equal(queue.isClosed, true);
});

test('an item the consumer has finished no longer counts', async () => {
  const { queue, state, pulled } = boundedAtFour();
  queue.push([1, 2, 3]);
  await pulled.next();
  queue.push([4]);
  // Asking for the next item says the first is done.
  assert.deepEqual((await pulled.next()).value, [4]);
  queue.push([5, 6, 7]);
  assert.equal(state.overflowed, false);
  assert.equal(queue.isClosed, false);
});
