/**
 * The node guard (ipamd/startup/node-guard.ts): one holder per abstract name, a second
 * taker refused with a line naming the holder, the name freed on release, and the name
 * made from the instance's identity alone (no endpoint in it), distinct per instance and
 * per launch. That two spellings of one IMDS endpoint meet is shown with real ipamds in
 * test/integration/one-ipamd-per-node.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { acquireNodeGuard, askHolder, NODE_GUARD_NAME, nodeGuardName } from '../../ipamd/startup/node-guard.js';
import type { InstanceIdentity } from '../../ipamd/startup/instance-identity.js';

const me = (pid: number) => ({
  pid,
  socket: `/run/s${pid}.sock`,
  checkpoint: `/var/c${pid}/ipam.json`,
  logFile: 'stdout',
  since: '2026-01-01T00:00:00.000Z',
});

test('a second taker is refused naming the holder; release frees the name', async () => {
  const name = `eni-ipam/test/${randomUUID()}`;
  const g = await acquireNodeGuard(name, me(11));
  await assert.rejects(
    acquireNodeGuard(name, me(22)),
    (e: Error) =>
      /another ipamd is running on this node \(pid 11, socket \/run\/s11.sock, checkpoint \/var\/c11\/ipam.json, log stdout, since 2026-01-01T00:00:00.000Z; abstract socket @eni-ipam\/test\//.test(
        e.message,
      ) && !e.message.includes('\n'),
  );
  assert.deepEqual(await askHolder(name), me(11));
  // Another name (another simulated node) is free meanwhile.
  const other = await acquireNodeGuard(`${name}-2`, me(33));
  await g.release();
  await g.release(); // idempotent
  assert.equal(await askHolder(name), 'gone');
  const again = await acquireNodeGuard(name, me(44));
  await Promise.all([again.release(), other.release()]);
});

test('the name is made of the instance identity alone: one per instance and launch', () => {
  const id: InstanceIdentity = {
    instanceId: 'i-0123456789abcdef0',
    accountId: '123456789012',
    region: 'us-west-2',
    pendingTime: '2026-01-01T00:00:00.000Z',
  };
  const a = nodeGuardName(id);
  assert.equal(a, nodeGuardName({ ...id }));
  assert.ok(a.startsWith(`${NODE_GUARD_NAME}/i-0123456789abcdef0/`), a);
  // Another instance, or the same id in another simulated cloud (another launch): another name.
  assert.notEqual(a, nodeGuardName({ ...id, instanceId: 'i-0123456789abcdef1' }));
  assert.notEqual(a, nodeGuardName({ ...id, pendingTime: '2026-01-01T00:00:00.001Z' }));
  assert.ok(Buffer.byteLength(a) < 107);
});
