/**
 * One ipamd per node (ipamd/startup/checkpoint-lock.ts). A DaemonSet rolled with
 * `maxSurge` > 0, or a second copy started by hand, runs a new ipamd beside the live one
 * with the same hostPath mounts. The new one must touch nothing before it refuses: not the
 * checkpoint (which it used to compact before its gRPC socket check refused it), not the
 * live ipamd's service.
 *
 * The real ipamd binary twice, as child processes on one simulated node (real AWS SDK
 * against the simulated EC2 and IMDS over HTTP), sharing the checkpoint and socket paths.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { startIpamd } from '../kit/ipamd-process.js';
import { ipamdClient } from '../helpers/ipamd-client.js';
import { startedSimNode } from '../property/sim-node.js';

/** Inode, size, mtime and bytes of each checkpoint file that exists. */
async function fingerprint(checkpoint: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const f of [checkpoint, `${checkpoint}.journal`, `${checkpoint}.journal.b`]) {
    const st = await stat(f).catch(() => undefined);
    if (!st) continue;
    out[path.basename(f)] =
      `ino ${st.ino} size ${st.size} mtime ${st.mtimeMs} ${(await readFile(f)).toString('base64')}`;
  }
  return out;
}

test('a second ipamd on the node refuses before it reads or writes the checkpoint; the live one keeps serving', async (t) => {
  const { node } = await startedSimNode(t, 41, { mode: 'child', cri: false, env: { WARM_IP_TARGET: '3' } });
  const c = ipamdClient(node.socket);
  t.after(() => c.close());
  const held = (await c.add('held')).ipv4_addr;
  // Journal records past the snapshot: what a start's compaction would fold in and rewrite.
  for (let i = 0; i < 5; i++) {
    await c.add(`churn${i}`);
    await c.del(`churn${i}`);
  }
  const before = await fingerprint(node.checkpoint);
  assert.ok(before['ipam.json.journal'], 'the journal exists');

  await assert.rejects(
    startIpamd({ env: node.env, logFile: path.join(node.dir, 'second-ipamd.log'), timeoutMs: 20_000 }),
    /another ipamd holds the checkpoint directory/,
  );
  assert.deepEqual(await fingerprint(node.checkpoint), before, 'the second ipamd changed the checkpoint files');

  // The live ipamd still serves, and still holds what it handed out.
  assert.equal((await c.add('held')).ipv4_addr, held, 'a repeated ADD returns the same IP');
  assert.ok((await c.add('after')).ipv4_addr);
  const allocations = (await node.introspect('/v1/allocations')) as Array<{ containerID: string }>;
  assert.deepEqual(allocations.map((a) => a.containerID).sort(), ['after', 'held']);

  // Once it stops, the next ipamd takes the node.
  await node.stop();
  await node.start();
  assert.equal((await c.add('held')).ipv4_addr, held);
});
