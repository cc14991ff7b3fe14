/**
 * The node guard (ipamd/startup/node-guard.ts): one holder per abstract name, a second
 * taker refused with a line naming the holder, the name freed on release, and the name
 * the same for every spelling of the instance's real IMDS, distinct per simulated one.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { acquireNodeGuard, askHolder, NODE_GUARD_NAME, nodeGuardName } from '../../ipamd/startup/node-guard.js';

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
      /another ipamd is running on this node \(pid 11, socket \/run\/s11.sock, checkpoint \/var\/c11\/ipam.json, log stdout/.test(
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

test('the name is the same for the real IMDS however spelled, and distinct per simulated endpoint', () => {
  for (const e of [
    'http://169.254.169.254',
    'http://169.254.169.254/',
    'HTTP://169.254.169.254',
    'http://[fd00:ec2::254]',
  ])
    assert.equal(nodeGuardName(e), NODE_GUARD_NAME, e);
  const a = nodeGuardName('http://127.0.0.1:4001/i-1');
  const b = nodeGuardName('http://127.0.0.1:4001/i-2');
  assert.notEqual(a, b);
  assert.equal(a, nodeGuardName('http://127.0.0.1:4001/i-1/'));
  assert.ok(a.startsWith(`${NODE_GUARD_NAME}@`));
  assert.ok(Buffer.byteLength(a) < 107);
});
