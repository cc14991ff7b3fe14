/**
 * Upgrading ipamd on a node whose pods were wired under the earlier host veth names
 * (issue #39 item 1): the real ipamd on the simulated cloud, real namespaces, pods wired
 * by the earlier ADD path (test/helpers/legacy-wiring.ts: `<prefix>` + sha256 of the key,
 * for the IPv6 egress pair too) beside pods the current plugin wires under the pod's name.
 *
 * - IPv6: ipamd stops and its IPv6 checkpoint is lost; the restarted ipamd adopts every
 *   wired address and the evidence pass gives each /128 and egress IPv4 back to its
 *   sandbox, the old-named pods' egress veths found under their older names; then every
 *   DEL frees both addresses and leaves no veth.
 * - IPv4 through the native shim (ipamd wires and deletes with its netlink helper): a DEL
 *   spooled while ipamd is down is applied to an old-named pod at the restart; the other
 *   old-named pods keep their addresses, CHECK passes, DEL removes its veth and rules, GC
 *   (its sandbox gone) its rules, and the new pod is untouched until its own DEL. No EC2 release call.
 * Needs root.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readdir, rm } from 'node:fs/promises';
import { readCniEnv } from '../../cni-plugin/env.js';
import type { PluginHost } from '../../cni-plugin/host.js';
import { connectIpamd } from '../../cni-plugin/ipamd-client.js';
import { parseNetConf } from '../../cni-plugin/netconf.js';
import { legacyHostVethName, podHostVethName } from '../../cni-plugin/veth-name.js';
import { spoolDirFor } from '../../ipamd/cni-exec/spool.js';
import { execPlugin, type CniCall } from '../../kit/cni-exec.js';
import { createNamedNetns, ipIn, type Netns } from '../../kit/netns.js';
import { releaseCallsSince } from '../../kit/nothing-lost.js';
import { waitFor } from '../../kit/wait.js';
import { LOCAL_IP } from '../../netfacts/ip-batch.js';
import { ipj, startCniNode } from '../helpers/cni-node.js';
import { startIpv6Node } from '../helpers/ipv6-node.js';
import { wireLegacy, type LegacyWired } from '../helpers/legacy-wiring.js';

const newId = () => randomBytes(32).toString('hex');
const podArgs = (pod: string, id: string) => ({
  K8S_POD_NAMESPACE: 'default',
  K8S_POD_NAME: pod,
  K8S_POD_INFRA_CONTAINER_ID: id,
});

/** The node's veths (host ends), name → MAC. */
const veths = async (node: Netns): Promise<Map<string, string>> =>
  new Map(
    (await ipj(node.path, ['link', 'show', 'type', 'veth'])).map((l: { ifname: string; address: string }) => [
      l.ifname,
      l.address,
    ]),
  );

/** One pod wired by the earlier ADD path into `ns`, against the ipamd at `config.ipamdSocket`. */
async function oldPod(
  config: Record<string, unknown>,
  node: Netns,
  ns: Netns,
  pod: string,
  family: 'ipv4' | 'ipv6',
): Promise<{ id: string; ns: Netns; pod: string; wired: LegacyWired }> {
  const id = newId();
  const env = readCniEnv({
    CNI_COMMAND: 'ADD',
    CNI_CONTAINERID: id,
    CNI_NETNS: ns.path,
    CNI_IFNAME: 'eth0',
    CNI_PATH: '/opt/cni/bin',
    CNI_ARGS: Object.entries(podArgs(pod, id))
      .map(([k, v]) => `${k}=${v}`)
      .join(';'),
  });
  const host: PluginHost = { ip: LOCAL_IP, nodeNetns: node.path, ipamd: (s) => connectIpamd(s) };
  const wired = await wireLegacy(env, parseNetConf(JSON.stringify({ ...config, ipFamily: family })), host, family);
  return { id, ns, pod, wired };
}

test('IPv6: the IPv6 checkpoint lost, the restarted ipamd gives old-named pods their /128 and egress IPv4 back; DEL frees them', async (t) => {
  const { h, node } = await startIpv6Node(t, 'uv6', { ENI_IPAM_GC_INTERVAL: '1s' });
  const cri = h.cri!;
  const config = { cniVersion: '1.1.0', name: 'aws-cni', type: 'eni-ipam', ipamdSocket: h.socket, mtu: 9001 };
  const call = (c: Omit<CniCall, 'config' | 'prefix'>) =>
    execPlugin({ ...c, config, prefix: ['nsenter', `--net=${node.path}`] });
  const nss: Netns[] = [];
  t.after(async () => {
    for (const ns of nss) await ns.remove();
  });
  const mk = async (i: number) => {
    const ns = await createNamedNetns(`eni-uv6-pod${i}-${process.pid}`);
    nss.push(ns);
    return ns;
  };
  const pods: Array<{ id: string; ns: Netns; pod: string; ipv6: string; egressV4?: string }> = [];
  for (let i = 0; i < 3; i++) {
    const p = await oldPod(config, node, await mk(i), `old-${i}`, 'ipv6');
    pods.push({ ...p, ipv6: p.wired.plan.ipv6!, egressV4: p.wired.plan.egressV4! });
  }
  const id = newId();
  const ns = await mk(3);
  const add = await call({
    command: 'ADD',
    containerId: id,
    netns: ns.path,
    ifName: 'eth0',
    args: podArgs('new-3', id),
  });
  assert.equal(add.code, 0, `${add.stdout} ${add.stderr}`);
  pods.push({ id, ns, pod: 'new-3', ipv6: String(add.json.ips[0].address).replace(/\/128$/, '') });
  for (const p of pods) cri.addPod(p.id, p.ipv6);
  const names = [...(await veths(node)).keys()];
  assert.equal(names.length, 8, names.join(' '));
  for (const p of pods.slice(0, 3)) assert.ok(names.includes(legacyHostVethName('eni', p.id, 'eth0/v4if0')));
  assert.ok(names.includes(podHostVethName('eni', 'default', 'new-3')));

  /** containerID → its /128 and egress IPv4, as ipamd's introspection lists them. */
  const held = async (): Promise<string> =>
    (
      (await (await fetch(`http://127.0.0.1:${h.ipamd!.introspectionPort}/v1/allocations`)).json()) as Array<{
        containerID: string;
        ipv6?: string;
        egressV4?: string;
      }>
    )
      .map((x) => `${x.containerID} ${x.ipv6} ${x.egressV4}`)
      .sort()
      .join('\n');
  const before = await held();
  for (const p of pods.slice(0, 3))
    assert.ok(before.includes(`${p.id} ${p.ipv6} ${p.egressV4}`), `old pod ${p.pod} as wired: ${before}`);
  assert.equal(before.split('\n').length, 4);

  // ipamd goes down and its IPv6 checkpoint is lost; the pods keep running.
  await h.ipamd!.stop(5000);
  await rm(`${h.checkpoint}.ipv6`);
  await rm(`${h.checkpoint}.ipv6.journal`, { force: true });
  await h.startIpamd();
  // Each /128 and egress IPv4 back with its sandbox, the egress address paired by its veth's name (either form).
  await waitFor(
    'every pod holds its /128 and egress IPv4 again',
    async () => (await held()) === before,
    30_000,
    200,
  ).catch(async (e: Error) => assert.fail(`${e.message}:\n${await held()}\nwanted\n${before}`));

  for (const p of pods) {
    const del = await call({
      command: 'DEL',
      containerId: p.id,
      netns: p.ns.path,
      ifName: 'eth0',
      args: podArgs(p.pod, p.id),
    });
    assert.equal(del.code, 0, del.stdout);
  }
  assert.equal(await held(), '', 'every DEL freed both addresses');
  assert.deepEqual([...(await veths(node)).keys()], [], 'no veth left');
});

test('IPv4 through the shim: a spooled DEL, CHECK, DEL and GC of old-named pods after the upgrade; the new pod untouched', async (t) => {
  const n = await startCniNode(t, 'uv4', { plugin: 'shim' });
  const callsBefore = n.h.sim.calls.length;
  const old: Array<{ id: string; ns: Netns; pod: string; wired: LegacyWired }> = [];
  for (let i = 0; i < 3; i++) old.push(await oldPod(n.config, n.node, await n.pod(), `old-${i}`, 'ipv4'));
  const [a, b, c] = old as [(typeof old)[0], (typeof old)[0], (typeof old)[0]];
  const id = newId();
  const ns = await n.pod();
  const add = await n.call({
    command: 'ADD',
    containerId: id,
    netns: ns.path,
    ifName: 'eth0',
    args: podArgs('new-3', id),
  });
  assert.equal(add.code, 0, `${add.stdout} ${add.stderr}`);
  const newName = podHostVethName('eni', 'default', 'new-3');
  const newIp = String(add.json.ips[0].address).split('/')[0]!;
  assert.deepEqual(
    [...(await veths(n.node)).keys()].sort(),
    [...old.map((p) => legacyHostVethName('eni', p.id, 'eth0')), newName].sort(),
  );
  const verb = (command: CniCall['command'], p: (typeof old)[0]) =>
    n.call({
      command,
      containerId: p.id,
      netns: p.ns.path,
      ifName: 'eth0',
      args: podArgs(p.pod, p.id),
      conf: { prevResult: p.wired.result },
    });
  const gone = async (p: (typeof old)[0]) => {
    const v = await veths(n.node);
    const rules = await ipIn(n.node.path, ['rule']);
    return !v.has(legacyHostVethName('eni', p.id, 'eth0')) && !rules.includes(p.wired.plan.ipv4);
  };

  // The upgrade: ipamd stops (a DEL of pod a meanwhile is spooled), the new build starts.
  await n.d.stop();
  const spooled = await verb('DEL', a);
  assert.deepEqual([spooled.code, spooled.stdout], [0, ''], spooled.stderr);
  n.d = await n.h.startIpamd();
  const spoolDir = spoolDirFor(n.config.execSocket as string);
  await waitFor(
    'the spooled DEL applied',
    async () => (await readdir(spoolDir)).filter((f) => !f.startsWith('.')).length === 0,
  );
  assert.ok(await gone(a), "pod a's old-named veth and rules removed by the spooled DEL");
  assert.equal((await n.d.status()).counts.assigned, 3, 'b, c and the new pod keep their IPs');

  const check = await verb('CHECK', b);
  assert.deepEqual([check.code, check.stdout], [0, ''], 'CHECK of an old-named pod passes');
  const del = await verb('DEL', b);
  assert.equal(del.code, 0, del.stdout);
  assert.ok(await gone(b), "pod b's old-named veth and rules removed by DEL");
  // Pod c's sandbox goes without a DEL (its netns, veth and route with it); the runtime's GC no longer lists it.
  await c.ns.remove();
  await waitFor(
    "pod c's veth gone with its netns",
    async () => !(await veths(n.node)).has(legacyHostVethName('eni', c.id, 'eth0')),
  );
  const gc = await n.call({
    command: 'GC',
    conf: { 'cni.dev/valid-attachments': [{ containerID: id, ifname: 'eth0' }] },
  });
  assert.equal(gc.code, 0, gc.stdout);
  assert.ok(await gone(c), "pod c's rules removed by GC");
  assert.equal((await n.d.status()).counts.assigned, 1, "GC released pod c's IP");
  assert.deepEqual([...(await veths(n.node)).keys()], [newName], 'only the new pod is left');
  assert.match(await ipIn(n.node.path, ['route']), new RegExp(`^${newIp.replaceAll('.', '\\.')} dev ${newName}`, 'm'));
  const last = await n.call({
    command: 'DEL',
    containerId: id,
    netns: ns.path,
    ifName: 'eth0',
    args: podArgs('new-3', id),
  });
  assert.equal(last.code, 0, last.stdout);
  assert.deepEqual([...(await veths(n.node)).keys()], []);
  assert.equal((await n.d.status()).counts.assigned, 0);
  assert.deepEqual(releaseCallsSince(n.h.sim.calls, callsBefore), [], 'no EC2 release call');
});
