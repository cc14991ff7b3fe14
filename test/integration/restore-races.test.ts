/**
 * docs/design.md#9-restore-sources-and-the-nothing-lost-check, crashes, races and bad checkpoints against a real containerd: ipamd killed
 * with SIGKILL in the middle of a burst of sandbox creations and removals; a pod deleted
 * while its successor with the same name is created; stale, foreign-interface and early
 * DELs; and checkpoint files that are truncated, zero-filled, of an unknown version or
 * from another boot. Every test ends with the "nothing lost" check.
 * Needs root and `scripts/ensure-deps.sh --containerd`.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { execPlugin, type CniCall, type CniOutcome } from '../../kit/cni-exec.js';
import { createNamedNetns } from '../../kit/netns.js';
import { createContainerdNode, type ContainerdNode, type RunningPod } from '../../kit/containerd-node.js';
import { cniLog, ipamdLog, releases } from '../helpers/restore-logs.js';
import { waitFor } from '../../kit/wait.js';

/** Runs the plugin in the node netns with the node's network configuration. */
function plugin(n: ContainerdNode, c: Omit<CniCall, 'config' | 'prefix'>): Promise<CniOutcome> {
  return execPlugin({ ...c, config: n.pluginConf, prefix: ['nsenter', `--net=${n.nodeNetns.path}`] });
}

/** Waits for the next evidence pass that could release and returns ipamd's allocations by container id. */
async function allocationsAfterPass(n: ContainerdNode): Promise<Map<string, string>> {
  await n.waitForGcPass();
  return new Map((await n.allocations()).map((a) => [a.containerID, a.ipv4]));
}

test('kill -9 ipamd during a burst of 20 concurrent RunPodSandbox / Stop+Remove → every live sandbox keeps its IP, no IP twice', async (t) => {
  const n = await createContainerdNode({ ipamdEnv: { WARM_IP_TARGET: '4' } });
  t.after(() => n.close());
  const old: RunningPod[] = [];
  for (let i = 0; i < 10; i++) old.push(await n.runPod(`old-${i}`));

  const linesBefore = (await cniLog(n.cniLog)).length;
  const burst = [...Array.from({ length: 10 }, (_, i) => n.runPod(`new-${i}`)), ...old.map((p) => n.removePod(p.id))];
  const settled = Promise.allSettled(burst);
  // Kill once a handful of CNI calls of the burst have completed: the rest are in flight or queued.
  await waitFor('6 CNI calls of the burst', async () => (await cniLog(n.cniLog)).length >= linesBefore + 6, 20_000, 5);
  await n.killIpamd();
  const results = await settled;
  const failedRuns = results
    .slice(0, 10)
    .map((r, i) => (r.status === 'rejected' ? `new-${i}` : undefined))
    .filter((x): x is string => !!x);
  const failedRemoves = results.slice(10).filter((r) => r.status === 'rejected').length;
  t.diagnostic(
    `burst: ${(await cniLog(n.cniLog)).length - linesBefore} CNI calls, ${failedRuns.length} RunPodSandbox failed, ${failedRemoves} removals failed`,
  );
  assert.equal(failedRemoves, 0, 'Stop/Remove succeed with ipamd gone (the plugin reports DEL success)');

  await n.startIpamd();
  // Kubelet retries the pods whose sandbox could not be created.
  for (const name of failedRuns) await n.runPod(name);
  const live = await n.liveSandboxes();
  assert.equal(live.length, 10);
  assert.equal(new Set(live.map((s) => s.ip)).size, 10, 'no IP twice');
  await n.assertNothingLost();
});

test("DEL(A) concurrent with ADD(A') of the same pod name, stale and foreign DELs, a DEL before its ADD → one IP per live sandbox, DEL frees only its own", async (t) => {
  const n = await createContainerdNode({ ipamdEnv: { WARM_IP_TARGET: '3' } });
  t.after(() => n.close());
  const first: RunningPod[] = [];
  for (let i = 0; i < 5; i++) first.push(await n.runPod(`same-${i}`));

  // Each pod is deleted while its successor with the same name (new uid, new sandbox) is created.
  const successors = await Promise.all(
    first.map(async (p) => {
      const [, next] = await Promise.all([n.removePod(p.id), n.runPod(p.name)]);
      return next;
    }),
  );
  let allocs = await allocationsAfterPass(n);
  for (const [i, p] of successors.entries()) {
    assert.equal(allocs.get(p.id), p.ip, `${p.name}' holds its IP`);
    assert.equal(allocs.has(first[i]!.id), false, `${p.name} (old sandbox) holds nothing`);
  }
  assert.equal(new Set(successors.map((p) => p.ip)).size, 5);

  // A stale DEL of the old sandbox (same pod name), and a DEL of the new sandbox's id on another interface.
  const a = first[0]!;
  const a2 = successors[0]!;
  const args = {
    IgnoreUnknown: '1',
    K8S_POD_NAMESPACE: 'default',
    K8S_POD_NAME: a.name,
    K8S_POD_INFRA_CONTAINER_ID: a.id,
  };
  assert.equal((await plugin(n, { command: 'DEL', containerId: a.id, netns: '', args })).code, 0);
  assert.equal(
    (
      await plugin(n, {
        command: 'DEL',
        containerId: a2.id,
        netns: '',
        ifName: 'eth1',
        args: { ...args, K8S_POD_INFRA_CONTAINER_ID: a2.id },
      })
    ).code,
    0,
  );
  allocs = new Map((await n.allocations()).map((x) => [x.containerID, x.ipv4]));
  assert.equal(allocs.get(a2.id), a2.ip, 'neither DEL touched the live successor');

  // A DEL that arrives before its ADD: success, nothing freed; the ADD then assigns normally; one release at the end.
  const x = randomBytes(32).toString('hex');
  const xArgs = {
    IgnoreUnknown: '1',
    K8S_POD_NAMESPACE: 'default',
    K8S_POD_NAME: 'early-del',
    K8S_POD_INFRA_CONTAINER_ID: x,
    K8S_POD_UID: randomUUID(),
  };
  const ns = await createNamedNetns(`eni-rs-x${process.pid}`);
  t.after(() => ns.remove());
  const releasesBefore = (await releases(n.ipamdLog)).length;
  assert.equal((await plugin(n, { command: 'DEL', containerId: x, netns: ns.path, args: xArgs })).code, 0);
  const add = await plugin(n, { command: 'ADD', containerId: x, netns: ns.path, args: xArgs });
  assert.equal(add.code, 0, add.stdout);
  const xIp = String(add.json.ips[0].address).split('/')[0]!;
  assert.ok(!successors.some((p) => p.ip === xIp), `the early-DEL container got ${xIp}, a live pod's IP`);
  assert.equal((await n.allocations()).find((q) => q.containerID === x)?.ipv4, xIp);
  assert.equal((await plugin(n, { command: 'DEL', containerId: x, netns: ns.path, args: xArgs })).code, 0);
  n.touch();
  const rel = (await releases(n.ipamdLog)).slice(releasesBefore);
  assert.deepEqual(
    rel.map((l) => [l.containerID, l.ip]),
    [[x, xIp]],
    'the stale, foreign and early DELs released nothing; the real DEL released one IP',
  );
  await n.assertNothingLost();
});

test("corrupt checkpoints (truncated, zeros, unknown version) are kept aside; another boot's is not trusted; state rebuilt from the CRI each time", async (t) => {
  const n = await createContainerdNode({ ipamdEnv: { WARM_IP_TARGET: '2' } });
  t.after(() => n.close());
  const pods: RunningPod[] = [];
  for (let i = 0; i < 5; i++) pods.push(await n.runPod(`ckpt-${i}`));
  const dir = path.dirname(n.checkpoint);
  const aside = async () =>
    (await readdir(dir)).filter((f) => f.startsWith(`${path.basename(n.checkpoint)}.corrupt-`)).sort();

  const variants: Array<{ name: string; bytes: (good: Buffer) => Buffer; keptAside: boolean }> = [
    { name: 'truncated', bytes: (g) => g.subarray(0, Math.floor(g.length / 2)), keptAside: true },
    { name: 'zeros', bytes: (g) => Buffer.alloc(g.length), keptAside: true },
    {
      name: 'unknown version',
      bytes: (g) => Buffer.from(JSON.stringify({ ...JSON.parse(g.toString()), version: 2 })),
      keptAside: true,
    },
    {
      name: 'other boot id',
      bytes: (g) => Buffer.from(JSON.stringify({ ...JSON.parse(g.toString()), bootId: randomUUID() })),
      keptAside: false,
    },
  ];
  for (const v of variants) {
    await n.stopIpamd();
    const good = await readFile(n.checkpoint);
    assert.equal(
      (JSON.parse(good.toString()) as { allocations: unknown[] }).allocations.length,
      5,
      `checkpoint before "${v.name}"`,
    );
    const bad = v.bytes(good);
    await writeFile(n.checkpoint, bad);
    const asideBefore = await aside();
    const d = await n.startIpamd();
    const s = await waitFor(
      `state rebuilt after a ${v.name} checkpoint`,
      async () => {
        const x = await n.status();
        return x.evidence.passes >= 1 && !x.releasesFrozen && x.counts.assigned === 5 ? x : undefined;
      },
      20_000,
      100,
    );
    assert.equal(s.counts.unverified, 0);
    const allocs = new Map((await n.allocations()).map((a) => [a.containerID, a.ipv4]));
    for (const p of pods) assert.equal(allocs.get(p.id), p.ip, `${p.name} rebuilt after a ${v.name} checkpoint`);
    const newAside = (await aside()).filter((f) => !asideBefore.includes(f));
    if (v.keptAside) {
      assert.equal(newAside.length, 1, `the ${v.name} file was moved aside`);
      assert.deepEqual(await readFile(path.join(dir, newAside[0]!)), bad, 'kept byte for byte');
    } else {
      assert.equal(
        newAside.length,
        0,
        'a valid checkpoint of another boot is not corrupt (docs/design.md#3-contracts)',
      );
      assert.equal(
        (await ipamdLog(n.ipamdLog)).filter((l) => l.msg.startsWith('checkpoint is from a previous boot')).length,
        1,
      );
    }
    assert.equal(d.child.exitCode, null, 'ipamd still runs (no crash loop)');
  }
  assert.equal(
    (await ipamdLog(n.ipamdLog, 'adopted a running sandbox the checkpoint lacked')).length,
    20,
    'each restart adopted the 5 sandboxes from the runtime',
  );
  await n.assertNothingLost();
});
