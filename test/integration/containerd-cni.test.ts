/**
 * ADD/DEL through a real containerd 1.6 (CRI) using the plugin exactly as ipamd installs
 * it (docs/design.md#11-the-cni-plugin-complete-and-fast, Tests): ipamd runs inside the node namespace with ENI_IPAM_INSTALL_CNI=true
 * and containerd's conf/bin dirs, so the conflist and the executable containerd runs are
 * whatever `installCni` wrote (no file layout is assumed beyond the CNI contract: the
 * conflist's `type` names an executable in the bin dir). Then a 50-pod burst with no
 * leftovers after DEL. ipamd's host networking is on in the node namespace (plugged ENI
 * links), so the burst also checks that pods on secondary ENIs leave through their ENI.
 * See containerd-cni-node.ts for the topology.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { constants, existsSync, watch } from 'node:fs';
import { access, readFile, readdir } from 'node:fs/promises';
import path from 'node:path';
import { readCheckpoint } from '../../ipamd/checkpoint/index.js';
import { createInstalledCniNode, type InstalledCniNode } from '../helpers/containerd-cni-node.js';
import { ipj } from '../helpers/cni-node.js';
import { findLosses } from '../../kit/nothing-lost.js';
import { waitFor } from '../../kit/wait.js';

const pod = (name: string) => ({ name, namespace: 'default', uid: randomUUID() });

/** Runs `fn` over `items` with at most `limit` calls in flight; results in input order. */
async function mapLimit<T, R>(items: T[], limit: number, fn: (x: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

/**
 * What pods left in the node namespace: links other than `lo` and the ENI links
 * (`eth<d>`), routes (any table) to a pod IP or through a non-ENI device, and rules
 * naming a pod IP or at the pod rule priorities (512 to-pod, 1536 from-pod).
 */
async function podLeftovers(ns: string, podIps: Set<string>): Promise<string[]> {
  const isNodeDev = (d: unknown) => d === 'lo' || /^eth\d+$/.test(String(d));
  const bad: string[] = [];
  for (const l of await ipj(ns, ['link', 'show'])) if (!isNodeDev(l.ifname)) bad.push(`link ${l.ifname}`);
  for (const r of await ipj(ns, ['-4', 'route', 'show', 'table', 'all'])) {
    if (podIps.has(String(r.dst).split('/')[0]!) || (r.dev && !isNodeDev(r.dev)))
      bad.push(`route ${r.dst} dev ${r.dev} table ${r.table ?? 'main'}`);
  }
  for (const r of await ipj(ns, ['-4', 'rule', 'show'])) {
    if (podIps.has(r.src) || podIps.has(r.dst) || r.priority === 512 || r.priority === 1536)
      bad.push(`rule ${JSON.stringify(r)}`);
  }
  return bad;
}

/**
 * For a pod whose IP is on a secondary ENI (device d ≥ 1): the plugin's from-pod rule
 * sends it to table d+1, and ipamd's default route there leaves through `eth<d>`.
 * Returns the problem, or undefined when the routing agrees (or the pod is on the primary ENI).
 */
async function egressMismatch(n: InstalledCniNode, ip: string): Promise<string | undefined> {
  const eni = [...n.sim.state.enis.values()].find((e) => e.secondaryIps.includes(ip));
  const d = eni?.attachment?.deviceIndex;
  if (d === undefined) return `${ip} is on no attached ENI`;
  const rule = (await ipj(n.nodeNetns.path, ['-4', 'rule', 'show'])).find((r) => r.priority === 1536 && r.src === ip);
  if (d === 0) return rule ? `${ip} is on the primary ENI but has a from-pod rule to table ${rule.table}` : undefined;
  if (String(rule?.table) !== String(d + 1))
    return `${ip} is on device ${d}, its from-pod rule says table ${rule?.table ?? '(none)'}`;
  const def = (await ipj(n.nodeNetns.path, ['-4', 'route', 'show', 'table', String(d + 1), 'default']))[0];
  return def?.dev === `eth${d}`
    ? undefined
    : `table ${d + 1} default route goes via ${def?.dev ?? '(none)'}, not eth${d}`;
}

/** What the pod namespace at `ns` holds on eth0: its /32 IPv4, MTU, and the default route's gateway. */
async function podSide(ns: string): Promise<{ ip?: string; mtu?: number; defaultVia?: string }> {
  const [link] = await ipj(ns, ['-4', 'addr', 'show', 'dev', 'eth0']);
  const a = (link?.addr_info ?? []).find((x: { prefixlen: number }) => x.prefixlen === 32);
  const def = (await ipj(ns, ['-4', 'route', 'show', 'default'])).find((r: { dev: string }) => r.dev === 'eth0');
  return { ip: a?.local, mtu: link?.mtu, defaultVia: def?.gateway };
}

/** Pod netns bind mounts still present (from /proc/self/mountinfo) among `paths`. */
async function mountedNetns(paths: string[]): Promise<string[]> {
  const mounts = new Set((await readFile('/proc/self/mountinfo', 'utf8')).split('\n').map((l) => l.split(' ')[4]));
  return paths.filter((p) => mounts.has(p) || existsSync(p));
}

/** ipamd's checkpoint (docs/design.md#3-contracts): the snapshot with its journal applied, as ipamd reads it at start. */
async function checkpoint(
  n: InstalledCniNode,
): Promise<{ allocations: Array<{ containerID: string; ipv4: string }>; cooldown: Array<{ ip: string }> }> {
  const r = await readCheckpoint(n.checkpoint);
  if (r.kind !== 'ok') throw new Error(`checkpoint ${n.checkpoint}: ${r.kind}`);
  return r.data;
}

/** Stops and removes every sandbox in `ids` (two DELs each: with the netns, then without). */
async function removeAll(n: InstalledCniNode, ids: string[], limit: number): Promise<void> {
  await mapLimit(ids, limit, async (id) => {
    await n.cri.stopPodSandbox(id);
    await n.cri.removePodSandbox(id);
  });
}

test('ipamd installs the conflist once serving; pods through containerd get its IPs and give them back', async (t) => {
  // Non-default pod MTU and veth prefix: the conflist must carry them to the plugin.
  const n = await createInstalledCniNode({ ipamdEnv: { POD_MTU: '1500', AWS_VPC_K8S_CNI_VETHPREFIX: 'pod' } });
  t.after(() => n.close());
  assert.deepEqual(await readdir(n.confDir), [], 'no conflist before ipamd runs');
  await assert.rejects(
    n.cri.runPodSandbox(pod('too-early')),
    /cni|network/i,
    'containerd has no network before ipamd installs one',
  );
  // containerd keeps a NOTREADY record of the failed sandbox, which it cannot stop without a network either.
  const failed = await n.cri.listPodSandbox();
  assert.deepEqual(
    failed.map((s) => [s.metadata?.name, s.state]),
    [['too-early', 'SANDBOX_NOTREADY']],
  );
  await assert.rejects(n.cri.stopPodSandbox(failed[0]!.id), /cni plugin not initialized/);

  // Each conf dir change as it happens, with whether ipamd's gRPC socket was there already.
  const changes: Array<{ file: string; socketListening: boolean }> = [];
  const watcher = watch(n.confDir, (_e, file) => {
    if (file && !String(file).startsWith('.'))
      changes.push({ file: String(file), socketListening: existsSync(n.socket) });
  });
  t.after(() => watcher.close());
  await n.startIpamd();
  await waitFor('the conflist change event', () => changes.length > 0, 5000);
  watcher.close();
  const confs = (await readdir(n.confDir)).filter((f) => !f.startsWith('.'));
  assert.equal(confs.length, 1, `one conflist, no temp file left: ${confs.join(', ')}`);
  assert.ok(
    changes.every((c) => c.socketListening),
    `the conflist appeared only after ipamd listened: ${JSON.stringify(changes)}`,
  );
  const conflist = JSON.parse(await readFile(path.join(n.confDir, confs[0]!), 'utf8'));
  const entry = conflist.plugins[0];
  assert.deepEqual([entry.ipamdSocket, entry.mtu, entry.vethPrefix], [n.socket, 1500, 'pod']);
  await access(path.join(n.binDir, entry.type), constants.X_OK);
  // containerd has loaded the conflist (startIpamd waited for it): the failed sandbox can
  // go now, a DEL of an attachment ipamd never saw, which succeeds and changes nothing.
  await removeAll(
    n,
    failed.map((s) => s.id),
    1,
  );
  assert.deepEqual(await n.cri.listPodSandbox(), []);

  const specs = ['web-0', 'web-1', 'web-2'].map(pod);
  const ids = await Promise.all(specs.map((p) => n.cri.runPodSandbox(p)));
  const allocations = await n.allocations();
  const netnsPaths: string[] = [];
  const ips = new Set<string>();
  for (const [i, id] of ids.entries()) {
    const ip = (await n.cri.podSandboxStatus(id)).status?.network?.ip ?? '';
    assert.match(ip, /^10\.0\.0\.\d+$/, `sandbox ${specs[i]!.name} has an IPv4`);
    ips.add(ip);
    const a = allocations.find((x) => x.containerID === id);
    assert.deepEqual(
      [a?.ipv4, a?.networkName, a?.ifName, a?.pod?.name, a?.pod?.uid],
      [ip, conflist.name, 'eth0', specs[i]!.name, specs[i]!.uid],
      'ipamd holds the same IP for this sandbox',
    );
    const ns = await n.cri.netnsPath(id);
    assert.match(ns ?? '', /^\/var\/run\/netns\/cni-/);
    netnsPaths.push(ns!);
    assert.deepEqual(
      await podSide(ns!),
      { ip, mtu: 1500, defaultVia: '169.254.1.1' },
      'eth0 in the pod: the IP, POD_MTU, the default route',
    );
    const [hostRoute] = await ipj(n.nodeNetns.path, ['-4', 'route', 'show', `${ip}/32`]);
    assert.match(
      hostRoute?.dev ?? '',
      /^pod/,
      'the node routes the pod IP to its host veth (AWS_VPC_K8S_CNI_VETHPREFIX)',
    );
  }
  assert.equal(ips.size, 3, 'three distinct IPs');
  assert.equal((await n.status()).counts.assigned, 3);

  assert.ok(
    (await podLeftovers(n.nodeNetns.path, ips)).length >= 9,
    'the leftover check sees the live pods (veth, /32 route, rule each)',
  );
  await removeAll(n, ids, 3);
  const s = await n.status();
  assert.deepEqual([s.counts.assigned, await n.allocations()], [0, []], 'every IP released');
  const cp = await checkpoint(n);
  assert.deepEqual(cp.allocations, []);
  assert.deepEqual(
    cp.cooldown
      .map((c) => c.ip)
      .filter((ip) => ips.has(ip))
      .sort(),
    [...ips].sort(),
    'the released IPs are cooling',
  );
  assert.ok(s.counts.cooling >= 3, `cooling ${s.counts.cooling}`);
  assert.deepEqual(await podLeftovers(n.nodeNetns.path, ips), [], 'no host veth, route or rule left');
  assert.deepEqual(await mountedNetns(netnsPaths), [], 'no pod netns left');
});

test('a 50-pod burst through containerd: unique IPs, nothing lost, nothing left after DEL', async (t) => {
  const PODS = 50;
  const PARALLEL = PODS; // all at once: a burst (measured ~3 s for the 50 ADDs on 2 vCPUs)
  const n = await createInstalledCniNode({ instanceType: 'm5.xlarge' });
  t.after(() => n.close());
  await n.startIpamd();

  const specs = Array.from({ length: PODS }, (_, i) => pod(`burst-${i}`));
  const t0 = Date.now();
  const ipAtStart = new Map<string, string>();
  const ids = await mapLimit(specs, PARALLEL, async (p) => {
    const id = await n.cri.runPodSandbox(p);
    ipAtStart.set(id, (await n.cri.podSandboxStatus(id)).status?.network?.ip ?? '');
    return id;
  });
  const addMs = Date.now() - t0;

  const live = await n.cri.liveSandboxes();
  assert.equal(live.length, PODS);
  assert.equal(new Set(live.map((s) => s.ip)).size, PODS, 'every pod got a unique IP');
  const netnsPaths: string[] = [];
  const ipInNetns = new Map<string, string | undefined>();
  for (const s of live) {
    const ns = await n.cri.netnsPath(s.id);
    assert.ok(ns, `netns of ${s.podName}`);
    netnsPaths.push(ns);
    const side = await podSide(ns);
    ipInNetns.set(s.id, side.ip);
    assert.deepEqual(
      [side.mtu, side.defaultVia],
      [9001, '169.254.1.1'],
      `MTU (AWS_VPC_ENI_MTU default) and default route in ${s.podName}`,
    );
  }
  const allocations = await n.allocations();
  const losses = findLosses({
    live,
    ipAtStart,
    ipInNetns,
    sim: n.sim.state,
    calls: n.sim.calls,
    instanceId: n.instanceId,
    allocations,
  });
  assert.deepEqual(losses, [], losses.join('\n'));
  assert.deepEqual(
    new Set(allocations.map((a) => a.containerID)),
    new Set(ids),
    'ipamd holds exactly the 50 sandboxes',
  );
  const egress = (await Promise.all(live.map((x) => egressMismatch(n, x.ip)))).filter(Boolean);
  assert.deepEqual(egress, [], 'pods on secondary ENIs leave through their ENI');
  const enisUsed = new Set(allocations.map((a) => a.eniId)).size;
  assert.ok(enisUsed >= 4, `50 pods need 4 ENIs of 14 pod IPs each (used ${enisUsed})`);

  const podIps = new Set(live.map((x) => x.ip));
  assert.ok((await podLeftovers(n.nodeNetns.path, podIps)).length >= 3 * PODS, 'the leftover check sees the live pods');
  const t1 = Date.now();
  await removeAll(n, ids, PARALLEL);
  const delMs = Date.now() - t1;
  t.diagnostic(
    `${PODS} RunPodSandbox, ${PARALLEL} at a time: ${addMs} ms; Stop+Remove: ${delMs} ms; ENIs used: ${enisUsed}`,
  );

  const s = await n.status();
  assert.equal(s.counts.assigned, 0, 'ipamd assigned count back to 0');
  assert.deepEqual(await n.allocations(), []);
  assert.deepEqual((await checkpoint(n)).allocations, [], 'nothing in the checkpoint');
  assert.deepEqual(await n.cri.listPodSandbox(), []);
  assert.deepEqual(await podLeftovers(n.nodeNetns.path, podIps), [], 'no host veth, route or rule left');
  assert.deepEqual(await mountedNetns(netnsPaths), [], 'no pod netns mount left');
});
