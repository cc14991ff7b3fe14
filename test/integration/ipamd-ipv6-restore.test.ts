/**
 * The restore evidence in IPv6 mode (issue #31 item 2): the real ipamd on the simulated
 * cloud (a dual-stack subnet), the real bundled plugin in a "node" netns, real pod netns
 * with /128s wired to veths, and the CRI stand-in. While ipamd is down one pod's netns
 * vanishes (its veth and /128 route go with it) and its sandbox leaves the runtime: after
 * the restart the evidence pass releases that /128 alone, the others stay held, and no
 * freeze is left behind (IPv6 mode serves no cached ENI inventory that EC2 must confirm).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { execPlugin, type CniCall } from '../../kit/cni-exec.js';
import { createNamedNetns, ipIn, type Netns } from '../../kit/netns.js';
import { waitFor } from '../../kit/wait.js';
import { startIpv6Node } from '../helpers/ipv6-node.js';

const V6_GC_MSG = 'GC: no source vouches for this IPv6 allocation; released into cooldown';

/** The containers whose IPv6 allocation the evidence pass released, from ipamd's log. */
const v6Releases = async (logFile: string): Promise<string[]> =>
  (await readFile(logFile, 'utf8').catch(() => ''))
    .split('\n')
    .filter((l) => l.includes(V6_GC_MSG))
    .map((l) => (JSON.parse(l) as { containerID: string }).containerID);

test('IPv6 mode: a pod whose netns vanished while ipamd was down loses its /128 after the restart; the others keep theirs', async (t) => {
  const { h, node } = await startIpv6Node(t, 'i6r', {
    ENI_IPAM_GC_INTERVAL: '1s',
    ENI_IPAM_GC_GRACE: '1s',
    IP_COOLDOWN_PERIOD: '1s',
  });
  const cri = h.cri!;
  const config = { cniVersion: '1.1.0', name: 'aws-cni', type: 'eni-ipam', ipamdSocket: h.socket, mtu: 9001 };
  const call = (c: Omit<CniCall, 'config' | 'prefix'> & { config?: Record<string, unknown> }) =>
    execPlugin({ ...c, config: c.config ?? config, prefix: ['nsenter', `--net=${node.path}`] });

  const pods: { ns: Netns; id: string; ipv6: string; result: Record<string, unknown>; gone?: boolean }[] = [];
  t.after(async () => {
    for (const p of pods) if (!p.gone) await p.ns.remove();
  });
  for (let i = 0; i < 3; i++) {
    const ns = await createNamedNetns(`eni-i6r-pod${i}-${process.pid}`);
    const id = randomBytes(32).toString('hex');
    const add = await call({ command: 'ADD', containerId: id, netns: ns.path, ifName: 'eth0' });
    assert.equal(add.code, 0, `ADD: ${add.stdout} ${add.stderr}`);
    const r = JSON.parse(add.stdout) as { ips: { address: string }[] };
    const ipv6 = r.ips[0]!.address.replace(/\/128$/, '');
    pods.push({ ns, id, ipv6, result: r });
    cri.addPod(id, ipv6);
  }
  const routes = await ipIn(node.path, ['-6', 'route', 'show', 'table', 'main']);
  for (const p of pods) assert.match(routes, new RegExp(`^${p.ipv6} dev `, 'm'), 'the /128 host route is wired');

  // ipamd goes down; one pod's sandbox dies without a DEL: its netns (and with it its veth and /128) vanish.
  await h.ipamd!.stop(5000);
  const lost = pods[2]!;
  await lost.ns.remove();
  lost.gone = true;
  cri.removePod(lost.id);
  await waitFor(
    "the kernel's deferred netns cleanup to drop the lost pod's /128",
    async () => !(await ipIn(node.path, ['-6', 'route', 'show', 'table', 'main'])).includes(`${lost.ipv6} `),
    10_000,
    50,
  );

  const restartAt = Date.now();
  await h.startIpamd();
  const logFile = path.join(h.dir, 'ipamd.log');
  await waitFor(
    'the lost /128 released by evidence',
    async () => (await v6Releases(logFile)).includes(lost.id),
    20_000,
    50,
  );
  t.diagnostic(`lost /128 released ${Date.now() - restartAt} ms after the restart began (GC interval 1 s, grace 1 s)`);
  // Later passes release nothing else.
  const passes = async () => (await h.ipamd!.status()).evidence.passes;
  const after = (await passes()) + 2;
  await waitFor('two more evidence passes', async () => (await passes()) >= after, 20_000, 100);
  assert.deepEqual(await v6Releases(logFile), [lost.id], 'only the lost pod');
  // No ENI reconcile runs in IPv6 mode to confirm a cached inventory: the restart must not leave a freeze behind.
  const st = await waitFor(
    'releases unfrozen after the restart',
    async () => {
      const s = await h.ipamd!.status();
      return s.releasesFrozen ? undefined : s;
    },
    20_000,
    100,
  ).catch(async (e: Error) => assert.fail(`${e.message}: ${(await h.ipamd!.status()).freezeReasons.join('; ')}`));
  assert.equal(st.releasesFrozen, false);
  for (const p of pods.slice(0, 2)) {
    const check = await call({
      command: 'CHECK',
      containerId: p.id,
      netns: p.ns.path,
      ifName: 'eth0',
      config: { ...config, prevResult: p.result },
    });
    assert.equal(check.code, 0, `CHECK of a kept pod after the restart: ${check.stdout}`);
  }
  const [eni] = [...h.sim.state.enis.values()];
  assert.ok(eni);
  const ipamd = h.ipamd!;
  const enis = (await (await fetch(`http://127.0.0.1:${ipamd.introspectionPort}/v1/enis`)).json()) as {
    0: { ENIs: Record<string, { IsPrimary: boolean; IPv6Cidrs: Record<string, { IPAddresses: object }> }> };
  };
  const primary = Object.values(enis[0].ENIs).find((e) => e.IsPrimary)!;
  const held = Object.values(primary.IPv6Cidrs).flatMap((c) => Object.keys(c.IPAddresses));
  assert.deepEqual(
    held.sort(),
    [pods[0]!.ipv6, pods[1]!.ipv6].sort(),
    'the kept pods hold their /128s, the lost one not',
  );
  for (const p of pods.slice(0, 2)) {
    const del = await call({ command: 'DEL', containerId: p.id, netns: p.ns.path, ifName: 'eth0' });
    assert.equal(del.code, 0, del.stdout);
  }
});
