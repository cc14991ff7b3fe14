/**
 * The seed outage without containerd (docs/design.md#13-evidence-before-trust items 1–3), through the real ipamd, the
 * real plugin and the real kernel: pods wired by the plugin in a node netns (veth, /32
 * route, ip rules), and a healthy CRI runtime that knows none of them (the "reachable
 * wrong runtime"). Before the kernel source, the first GC pass after the grace released
 * every one. Now the kernel vouches, the runtime is suspect and says so; once the right
 * runtime answers, a pod whose DEL was lost is released within one pass, nothing else.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { startCniNode } from '../helpers/cni-node.js';
import { startCriStandIn } from '../../sim/cri/index.js';
import { waitFor } from '../../kit/wait.js';

const GC_MSG = 'GC: no source vouches for this allocation; released into cooldown';
const gcReleases = async (logFile: string): Promise<string[]> =>
  (await readFile(logFile, 'utf8'))
    .split('\n')
    .filter((l) => l.includes(GC_MSG))
    .map((l) => (JSON.parse(l) as { containerID: string }).containerID);

test('a healthy runtime that knows none of the wired pods releases nothing; the right one releases only the lost DEL', async (t) => {
  const cri = await startCriStandIn({ identity: null });
  t.after(() => cri.close());
  const n = await startCniNode(t, 'rk', {
    ipamdEnv: {
      CRI_RUNTIME_ENDPOINT: cri.endpoint,
      ENI_IPAM_GC_INTERVAL: '1s',
      ENI_IPAM_GC_GRACE: '1s',
      ENI_IPAM_SHRINK_DELAY: '1s',
      IP_COOLDOWN_PERIOD: '1s',
      WARM_IP_TARGET: '1',
    },
  });
  const pods: Array<{ id: string; ip: string; netns: { path: string; remove(): Promise<void> } }> = [];
  for (let i = 0; i < 6; i++) {
    const netns = await n.pod();
    const id = randomBytes(32).toString('hex');
    const add = await n.call({ command: 'ADD', containerId: id, netns: netns.path, ifName: 'eth0' });
    assert.equal(add.code, 0, add.stdout);
    pods.push({ id, ip: String(add.json.ips[0].address).split('/')[0]!, netns });
  }
  const callsBefore = n.h.sim.calls.length;
  // The runtime answers, with no sandboxes: wait until passes ran well after the grace.
  const t0 = Date.now();
  const s = await waitFor(
    'an evidence pass well after the grace',
    async () => {
      const st = await n.d.status();
      return (st.evidence.lastPassAt ?? 0) > t0 + 2500 ? st : undefined;
    },
    20_000,
    100,
  );
  assert.deepEqual(await gcReleases(path.join(n.h.dir, 'ipamd.log')), [], 'nothing released by the GC');
  assert.equal(s.counts.assigned, 6);
  assert.equal(s.releasesFrozen, true);
  assert.match(
    s.freezeReasons.join('\n'),
    new RegExp(
      `^cri: suspect: runtime at ${cri.endpoint.replace(/[/.]/g, '\\$&')} \\(identity unknown\\) answered with 0 sandboxes and knows 0 of the 6 pods the kernel shows wired; the checkpoint holds 6 from this boot and the kernel shows 6 pod veths$`,
      'm',
    ),
  );
  assert.equal(s.evidence.sources.cri, 'suspect');
  assert.equal(s.evidence.lastPass.kernelVouched, 6);
  assert.deepEqual(
    n.h.sim.calls.slice(callsBefore).filter((c) => /Unassign|Detach|DeleteNetworkInterface/.test(c.action)),
    [],
  );

  // The right runtime answers; one pod's sandbox died without a DEL (its netns removed: the kernel drops its veth and route).
  const lost = pods.pop()!;
  await lost.netns.remove();
  for (const p of pods) cri.addPod(p.id, p.ip);
  const healthyAt = Date.now();
  await waitFor(
    'the lost DEL released',
    async () => (await gcReleases(path.join(n.h.dir, 'ipamd.log'))).includes(lost.id),
    20_000,
    50,
  );
  t.diagnostic(
    `leaked allocation released ${Date.now() - healthyAt} ms after the runtime became right (GC interval 1 s, grace long passed; includes the kernel's deferred netns cleanup)`,
  );
  assert.deepEqual(await gcReleases(path.join(n.h.dir, 'ipamd.log')), [lost.id], 'only the lost one');
  const after = await waitFor(
    'the freeze lifted',
    async () => {
      const st = await n.d.status();
      return st.releasesFrozen ? undefined : st;
    },
    10_000,
    50,
  );
  assert.equal(after.counts.assigned, 5);
});
