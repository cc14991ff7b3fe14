/**
 * ipamd's kernel reads (the evidence for releases) start their `ip` from the spawn helper
 * from the first evidence pass on, not from the CNI exec server once it listens: with no
 * exec server at all (ENI_IPAM_CNI_EXEC=false) ipamd still does not fork itself for them
 * (docs/design.md#16-footprint-and-latency). Real ipamd child process on the simulated cloud.
 */
import assert from 'node:assert/strict';
import { readlinkSync } from 'node:fs';
import { test } from 'node:test';
import { BUNDLED_SPAWN_HELPER } from '../../ipamd/cni-exec/spawn-helper.js';
import { childrenOf } from '../../kit/host-scan.js';
import { waitFor } from '../../kit/wait.js';
import { startedSimNode } from '../../kit/sim-node.js';

test('with no CNI exec server, the first evidence pass reads the kernel through the spawn helper', async (t) => {
  const { node } = await startedSimNode(t, 47, { mode: 'child', cri: false, env: { ENI_IPAM_CNI_EXEC: 'false' } });
  const pid = node.pid!;
  const helperUp = () =>
    childrenOf(pid).some((c) => {
      try {
        return readlinkSync(`/proc/${c}/exe`) === BUNDLED_SPAWN_HELPER;
      } catch {
        return false; // exited meanwhile
      }
    });
  await waitFor('ipamd has started eni-ipam-spawn', () => helperUp() || undefined, 30_000);
  const s = (await node.introspect('/v1/stage-trace')) as Record<string, { count: number }>;
  assert.ok(
    (s['cni.spawn.call']?.count ?? 0) >= 1,
    `spawns through the helper: ${JSON.stringify(s['cni.spawn.call'])}`,
  );
});
