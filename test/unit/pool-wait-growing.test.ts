/**
 * An ADD's wait for an address while a new ENI is still being created (pool-controller.ts
 * `waitForAddress(timeoutMs, growingWaitMs)`, ipam-service.ts ENI_IPAM_ADD_WAIT_GROWING_TIMEOUT):
 * past its own time it keeps its place while the creation is under way, up to the longer
 * bound, and fails as before when nothing is on its way. MemoryEc2 holds
 * CreateNetworkInterface open until the test lets it answer; virtual time throughout.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PoolExhaustedError } from '../../ipamd/controller/pool-loop/pool-controller.js';
import { controllerKit as node } from '../helpers/controller-kit.js';

/** A started node whose primary ENI is full, with the next CreateNetworkInterface held open; `answer()` lets it finish. */
async function heldCreation() {
  const n = node({ targets: { warmIpTarget: 0, minimumIpTarget: 0 } });
  await n.fillPrimary();
  let answer!: () => void;
  const held = new Promise<void>((r) => (answer = r));
  n.ec2.during('CreateNetworkInterface', () => held);
  n.pool.start();
  await n.vt.tick();
  return { n, answer };
}

/** Starts a wait and records how it ended. */
function watch(p: Promise<void>) {
  let done = false;
  let err: Error | undefined;
  void p.then(
    () => void (done = true),
    (e: Error) => void (err = e),
  );
  return {
    get done(): boolean {
      return done;
    },
    get err(): Error | undefined {
      return err;
    },
  };
}

test('past its own wait, an ADD keeps waiting while a new ENI is being created, and is served by it', async (t) => {
  const { n, answer } = await heldCreation();
  t.after(() => n.pool.stop());
  const w = watch(n.pool.waitForAddress(3_000, 20_000));
  await n.vt.tick(1);
  assert.equal(n.ec2.count('CreateNetworkInterface'), 1, 'a new ENI was asked for');
  await n.vt.tick(10_000);
  assert.equal(w.err?.message, undefined, 'still waiting 10 s in, the ENI being created');
  assert.equal(w.done, false);
  answer();
  await n.vt.tick(5_000);
  assert.equal(w.err?.message, undefined);
  assert.equal(w.done, true, 'woken by the new ENI');
});

test('without the longer bound, or once it has passed, the wait fails as before', async (t) => {
  const { n, answer } = await heldCreation();
  t.after(() => {
    answer();
    n.pool.stop();
  });
  const plain = watch(n.pool.waitForAddress(3_000));
  const bounded = watch(n.pool.waitForAddress(3_000, 8_000));
  await n.vt.tick(3_000);
  assert.ok(plain.err instanceof PoolExhaustedError, 'no longer bound: fails at its own time');
  assert.match(plain.err.message, /after waiting 3000 ms/);
  assert.equal(bounded.err?.message, undefined, 'the bounded one still waits');
  await n.vt.tick(5_000);
  assert.ok(bounded.err instanceof PoolExhaustedError, 'fails at the longer bound while the ENI is still on its way');
  assert.match(bounded.err.message, /after waiting 8000 ms/);
});

test('between two tries at a new ENI (a creation failed, the next one held back), an ADD past its own wait keeps its place and is served', async (t) => {
  // The multi-node exhaust run under load: an ADD past its own 10 s failed in a gap where no
  // creation was in flight although the pool was still growing (EC2 failed one, the next was
  // backing off), 24 s before the subnet was empty.
  const n = node({ targets: { warmIpTarget: 0, minimumIpTarget: 0 } });
  await n.fillPrimary();
  n.ec2.failNext('CreateNetworkInterface', 'not-applied-5xx');
  n.pool.start();
  await n.vt.tick();
  t.after(() => n.pool.stop());
  const w = watch(n.pool.waitForAddress(3_000, 20_000));
  await n.vt.tick(4_000);
  assert.equal(n.ec2.count('CreateNetworkInterface'), 1, 'the first creation was tried and failed');
  assert.equal(w.err?.message, undefined, 'past its own 3 s, still waiting: the pool can still grow');
  await n.vt.tick(12_000);
  assert.equal(w.err?.message, undefined);
  assert.equal(w.done, true, 'served by the ENI of the next try');
  assert.ok(n.ec2.count('CreateNetworkInterface') >= 2);
});

test('once nothing can grow the pool (the subnet is full), a waiter past its own wait fails at once, not at the longer bound', async (t) => {
  const n = node({ targets: { warmIpTarget: 0, minimumIpTarget: 0 } });
  await n.fillPrimary();
  n.ec2.failNext('CreateNetworkInterface', { code: 'InsufficientFreeAddressesInSubnet' }, { count: 1000 });
  n.pool.start();
  await n.vt.tick();
  t.after(() => n.pool.stop());
  const w = watch(n.pool.waitForAddress(3_000, 20_000));
  await n.vt.tick(4_000);
  assert.ok(w.err instanceof PoolExhaustedError, 'failed by 4 s, not kept to 20 s');
});
