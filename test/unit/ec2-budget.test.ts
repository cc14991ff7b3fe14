/**
 * The EC2 budget, deterministic (injected clock and random): token bucket refill and
 * FIFO reservations, equal-jitter backoff, failure classification, which actions may be
 * retried, and the shared per-class back-off hold.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { TokenBucket } from '../../ipamd/cloud/token-bucket.js';
import { backoffDelay, classifyEc2Failure, isRetryable } from '../../ipamd/cloud/retry.js';
import { Ec2Budget, ec2ActionClass } from '../../ipamd/cloud/ec2-budget.js';

function clock(start = 1_000_000) {
  let t = start;
  return {
    now: () => t,
    advance: (ms: number) => {
      t += ms;
    },
  };
}

test('token bucket: starts full, refuses when empty, refills at the rate, never above burst', () => {
  const c = clock();
  const b = new TokenBucket({ ratePerSecond: 2, burst: 3, now: c.now });
  assert.equal(b.tryTake(), true);
  assert.equal(b.tryTake(), true);
  assert.equal(b.tryTake(), true);
  assert.equal(b.tryTake(), false, 'burst of 3 spent');
  c.advance(499);
  assert.equal(b.tryTake(), false, 'just under one token after 499 ms at 2/s');
  c.advance(1);
  assert.equal(b.tryTake(), true, 'one token after 500 ms');
  c.advance(60_000);
  assert.equal(b.available(), 3, 'capped at burst');
});

test('token bucket: reservations queue FIFO at 1/rate apart', () => {
  const c = clock();
  const b = new TokenBucket({ ratePerSecond: 0.5, burst: 1, now: c.now });
  assert.deepEqual([b.reserve(), b.reserve(), b.reserve()], [0, 2000, 4000]);
  c.advance(2000);
  assert.equal(b.reserve(), 4000, 'the 4th caller queues behind the two still waiting');
  assert.equal(b.tryTake(), false, 'a queue means no token to take');
});

test('token bucket: bad settings are refused', () => {
  assert.throws(() => new TokenBucket({ ratePerSecond: 0, burst: 1 }), RangeError);
  assert.throws(() => new TokenBucket({ ratePerSecond: 1, burst: 0.5 }), RangeError);
  assert.throws(() => new TokenBucket({ ratePerSecond: Infinity, burst: 1 }), RangeError);
});

test('backoff: equal jitter doubles from base to cap; half of each step is always waited', () => {
  const p = { baseMs: 100, capMs: 1000 };
  const table: Array<[number, number, number]> = [
    // [retry n, random, expected ms]
    [1, 0, 50],
    [1, 0.999999, 100],
    [2, 0, 100],
    [2, 0.5, 150],
    [3, 0, 200],
    [4, 1 - 1e-9, 800],
    [5, 0, 500],
    [5, 1 - 1e-9, 1000],
    [40, 0, 500],
  ];
  for (const [n, r, want] of table)
    assert.equal(
      backoffDelay(n, p, () => r),
      want,
      `n=${n} random=${r}`,
    );
  assert.throws(() => backoffDelay(0, p, () => 0), RangeError);
});

test('classification of EC2 failures', () => {
  const table: Array<[string, number | undefined, string]> = [
    ['RequestLimitExceeded', 503, 'throttle'],
    ['Throttling', 400, 'throttle'],
    ['SomethingNew', 429, 'throttle'],
    ['InternalError', 500, 'server'],
    ['Unavailable', 503, 'server'],
    ['ServiceUnavailable', undefined, 'server'],
    ['Weird', 502, 'server'],
    ['TimeoutError', undefined, 'transport'],
    ['ECONNRESET', undefined, 'transport'],
    ['Unknown', undefined, 'transport'],
    ['InvalidNetworkInterfaceID.NotFound', 400, 'client'],
    ['InsufficientFreeAddressesInSubnet', 400, 'client'],
  ];
  for (const [code, status, want] of table) assert.equal(classifyEc2Failure(code, status), want, `${code} ${status}`);
});

test('retry policy: throttling retried everywhere; 5xx/timeouts only where repeating is safe', () => {
  for (const a of [
    'CreateNetworkInterface',
    'AssignPrivateIpAddresses',
    'AttachNetworkInterface',
    'DescribeNetworkInterfaces',
    'UnassignPrivateIpAddresses',
  ]) {
    assert.equal(isRetryable(a, 'throttle'), true, a);
    assert.equal(isRetryable(a, 'client'), false, a);
  }
  for (const a of ['CreateNetworkInterface', 'AssignPrivateIpAddresses', 'AttachNetworkInterface']) {
    assert.equal(isRetryable(a, 'server'), false, a);
    assert.equal(isRetryable(a, 'transport'), false, a);
  }
  for (const a of [
    'DescribeNetworkInterfaces',
    'UnassignPrivateIpAddresses',
    'DetachNetworkInterface',
    'DeleteNetworkInterface',
    'CreateTags',
    'ModifyNetworkInterfaceAttribute',
  ]) {
    assert.equal(isRetryable(a, 'server'), true, a);
    assert.equal(isRetryable(a, 'transport'), true, a);
  }
});

test('budget: a throttle puts a growing hold on its class only; success resets the growth', () => {
  const c = clock();
  const b = new Ec2Budget({
    ratePerSecond: 1000,
    burst: 1000,
    backoff: { baseMs: 100, capMs: 10_000 },
    now: c.now,
    random: () => 0,
  });
  assert.equal(ec2ActionClass('DescribeSubnets'), 'describe');
  assert.equal(ec2ActionClass('AssignPrivateIpAddresses'), 'mutating');
  assert.equal(b.reserve('AssignPrivateIpAddresses'), 0);

  const v1 = b.onFailure('AssignPrivateIpAddresses', 'RequestLimitExceeded', 503, 1, 5);
  assert.deepEqual(v1, { kind: 'throttle', retry: true, holdMs: 50 });
  assert.equal(b.reserve('CreateNetworkInterface'), 50, 'every mutating call waits out the hold');
  assert.equal(b.reserve('DescribeNetworkInterfaces'), 0, 'describe calls are another class');
  c.advance(50);
  const v2 = b.onFailure('CreateNetworkInterface', 'RequestLimitExceeded', 503, 1, 5);
  assert.equal(v2.holdMs, 100, 'the second consecutive throttle doubles the hold, whatever the action');
  const v3 = b.onFailure('AssignPrivateIpAddresses', 'RequestLimitExceeded', 503, 5, 5);
  assert.equal(v3.retry, false, 'no attempts left');
  assert.equal(v3.holdMs, 200);
  c.advance(200);
  assert.equal(b.holdRemaining('mutating'), 0);
  b.onSuccess('AssignPrivateIpAddresses');
  assert.equal(
    b.onFailure('AssignPrivateIpAddresses', 'RequestLimitExceeded', 503, 1, 5).holdMs,
    50,
    'growth starts over after a success',
  );
});

test('budget: server errors hold but are not retried for non-idempotent calls; client errors neither', () => {
  const c = clock();
  const b = new Ec2Budget({
    ratePerSecond: 1000,
    burst: 1000,
    backoff: { baseMs: 100, capMs: 10_000 },
    now: c.now,
    random: () => 0,
  });
  assert.deepEqual(b.onFailure('CreateNetworkInterface', 'InternalError', 500, 1, 5), {
    kind: 'server',
    retry: false,
    holdMs: 50,
  });
  assert.deepEqual(b.onFailure('DeleteNetworkInterface', 'InternalError', 500, 1, 5), {
    kind: 'server',
    retry: true,
    holdMs: 100,
  });
  assert.deepEqual(b.onFailure('DescribeNetworkInterfaces', 'TimeoutError', undefined, 1, 5), {
    kind: 'transport',
    retry: true,
    holdMs: 50,
  });
  assert.deepEqual(b.onFailure('AssignPrivateIpAddresses', 'InsufficientFreeAddressesInSubnet', 400, 1, 5), {
    kind: 'client',
    retry: false,
    holdMs: 0,
  });
});

test('budget: the token bucket spaces calls when the node itself is over its rate', () => {
  const c = clock();
  const b = new Ec2Budget({ ratePerSecond: 2, burst: 2, now: c.now, random: () => 0 });
  assert.deepEqual(
    [0, 1, 2, 3].map(() => b.reserve('DescribeNetworkInterfaces')),
    [0, 0, 500, 1000],
  );
});
