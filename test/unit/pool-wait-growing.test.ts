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
