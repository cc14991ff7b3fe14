/**
 * Event dedup and rate limiting (ipamd/observability/event-book.ts): one Event per object
 * and reason within the window, its count carried by throttled writes; a full book drops.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EventBook, type EventOccurrence } from '../../ipamd/observability/event-book.js';

const occ = (name: string, reason = 'FailedIPAllocation', message = 'no IP'): EventOccurrence => ({
  involved: { kind: 'Pod', name, namespace: 'default', uid: `uid-${name}` },
  namespace: 'default',
  type: 'Warning',
  reason,
  message,
});

test('repeats within the window become one Event with a growing count, written at most once per interval', () => {
  const b = new EventBook({ minWriteIntervalMs: 10_000, windowMs: 600_000 });
  b.observe(occ('a'), 1000);
  const w1 = b.take(1000)!;
  assert.equal(w1.op, 'create');
  assert.equal(w1.count, 1);
  b.written(w1, 'a.1');
  for (let i = 0; i < 5; i++) b.observe(occ('a', 'FailedIPAllocation', `no IP ${i}`), 2000 + i);
  assert.equal(b.take(3000), undefined, 'within the write interval: nothing');
  assert.equal(b.nextDueIn(3000), 8000);
  const w2 = b.take(11_000)!;
  assert.deepEqual(
    { op: w2.op, name: w2.name, count: w2.count, msg: w2.occurrence.message, first: w2.firstTimestamp },
    { op: 'patch', name: 'a.1', count: 6, msg: 'no IP 4', first: 1000 },
  );
  b.written(w2, 'a.1');
  assert.equal(b.take(30_000), undefined, 'nothing new: no write');
  assert.equal(b.size, 1);
  // After the window, a new series: a new Event.
  b.observe(occ('a'), 700_000);
  const w3 = b.take(700_000)!;
  assert.equal(w3.op, 'create');
  assert.equal(w3.count, 1);
});

test('different reasons or objects are different Events; a 404 on patch recreates', () => {
  const b = new EventBook();
  b.observe(occ('a'), 0);
  b.observe(occ('a', 'Other'), 0);
  b.observe(occ('b'), 0);
  const ws = [b.take(0)!, b.take(0)!, b.take(0)!];
  assert.equal(new Set(ws.map((w) => w.key)).size, 3);
  b.written(ws[0]!, 'n');
  b.observe(occ('a'), 20_000);
  const p = b.take(20_000)!;
  assert.equal(p.op, 'patch');
  b.failed(p, true);
  b.observe(occ('a'), 40_000);
  assert.equal(b.take(40_000)!.op, 'create');
});

test('the token bucket bounds writes; a full book drops new keys', () => {
  const b = new EventBook({ burst: 2, refillMs: 1000, maxEntries: 3 });
  for (const n of ['a', 'b', 'c', 'd']) b.observe(occ(n), 0);
  assert.equal(b.dropped, 1);
  assert.equal(b.size, 3);
  assert.ok(b.take(0));
  assert.ok(b.take(0));
  assert.equal(b.take(0), undefined, 'bucket empty');
  assert.equal(b.nextDueIn(500), 500);
  assert.ok(b.take(1000), 'refilled');
});
