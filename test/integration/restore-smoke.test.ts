import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createContainerdNode } from '../helpers/containerd-node.js';

test('smoke', async (t) => {
  const n = await createContainerdNode({ ipamdEnv: { WARM_IP_TARGET: '2' } });
  t.after(() => n.close());
  const t0 = Date.now();
  const p = await n.runPod('web-0');
  console.log('runPod ms', Date.now() - t0, p);
  const q = await n.runPod('web-1');
  await n.removePod(q.id);
  await n.assertNothingLost();
  console.log(await n.status());
  assert.ok(p.ip);
});
