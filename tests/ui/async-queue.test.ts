import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AsyncQueue } from '../../services/ui/async-queue.ts';

test('an item the consumer is still working on counts toward the bound', async () => {
  let overflowed = false;
  const queue = new AsyncQueue<number[]>(
    4,
    () => {
      overflowed = true;
    },
    (b) => b.length,
  );
  const pulled = queue[Symbol.asyncIterator]();
  queue.push([1, 2, 3]);
  // The consumer took the batch and is stuck writing it (a client that stopped reading).
  assert.deepEqual((await pulled.next()).value, [1, 2, 3]);
  queue.push([4]);
  assert.equal(overflowed, false);
  queue.push([5]);
  assert.equal(overflowed, true, 'three in hand plus two waiting is past four');
  assert.equal(queue.isClosed, true);
});

test('an item the consumer has finished no longer counts', async () => {
  let overflowed = false;
  const queue = new AsyncQueue<number[]>(
    4,
    () => {
      overflowed = true;
    },
    (b) => b.length,
  );
  const pulled = queue[Symbol.asyncIterator]();
  queue.push([1, 2, 3]);
  await pulled.next();
  queue.push([4]);
  // Asking for the next item says the first is done.
  assert.deepEqual((await pulled.next()).value, [4]);
  queue.push([5, 6, 7]);
  assert.equal(overflowed, false);
  assert.equal(queue.isClosed, false);
});
