/**
 * Host veth names (issue #39 item 1) in real network namespaces, through the plugin's
 * verbs in this process against the ipamd stand-in, on both node sides: ipamd's rtnetlink
 * helper and the `ip` batches; in `ipv4` and `ipv6` mode (the egress pair too).
 *
 * - Upgrade: pods wired as the eni-ipam before this change wired them (main's ADD path:
 *   the same wiring functions with its names, sha256 of the container id and interface)
 *   keep running beside pods wired under the upstream names, and the new CHECK, DEL and
 *   GC, and ipamd's DEL spool (its teardown), find them under their old names: nothing of
 *   theirs is left, nothing else touched.
 * - A fast re-create (two sandboxes of one pod share the upstream name): the newer ADD
 *   takes the name over as amazon-vpc-cni-k8s does; the older one's DEL or GC leaves the
 *   newer one's veth, route and reachability alone, and so does a spooled DEL of it.
 * Needs root.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import test from 'node:test';
import { cmdAdd } from '../../cni-plugin/add.js';
import { cmdCheck } from '../../cni-plugin/check.js';
import { cmdDel } from '../../cni-plugin/del.js';
import { readCniEnv, type CniEnv } from '../../cni-plugin/env.js';
import { cmdGc } from '../../cni-plugin/gc.js';
import { teardownAttachment } from '../../cni-plugin/host-teardown.js';
import type { PluginHost } from '../../cni-plugin/host.js';
import { connectIpamd } from '../../cni-plugin/ipamd-client.js';
import { parseNetConf, type NetConf } from '../../cni-plugin/netconf.js';
import { hostVethMac, hostVethName, legacyHostVethName, podHostVethName } from '../../cni-plugin/veth-name.js';
import { egressVeth } from '../../cni-plugin/wiring-plan.js';
import { startCniBackendStandIn, type CniBackendStandIn } from '../../kit/cni-backend-standin.js';
import { ipIn, netnsMaker, type Netns } from '../../kit/netns.js';
import { LOCAL_IP } from '../../netfacts/ip-batch.js';
import { waitFor } from '../../kit/wait.js';
import { netlinkNode } from '../helpers/netlink-node.js';
import { wireLegacy } from '../helpers/legacy-wiring.js';

type Family = 'ipv4' | 'ipv6';
type Side = 'netlink' | 'ip';
const tag = `${process.pid}`;
const newId = () => randomBytes(32).toString('hex');

// eslint-disable-next-line @typescript-eslint/no-explicit-any
const ipj = async (ns: Netns, args: string[]): Promise<any[]> =>
  JSON.parse((await ipIn(ns.path, ['-j', ...args])) || '[]');
/** Node links named like host veths (`eni…` a pod's, `veth…` an egress pair's), name → MAC. */
const hostLinks = async (node: Netns): Promise<Map<string, string>> =>
  new Map(
    (await ipj(node, ['link', 'show']))
      .filter((l) => /^(eni|veth)/.test(l.ifname))
      .map((l) => [l.ifname as string, l.address as string]),
  );

interface World {
  node: Netns;
  mk: (name: string) => Promise<Netns>;
  standin: CniBackendStandIn;
  host: PluginHost;
  conf: NetConf;
  family: Family;
}

async function world(t: test.TestContext, family: Family, side: Side): Promise<World> {
  const mk = netnsMaker(t, `vn${family === 'ipv6' ? '6' : '4'}${side[0]}`, tag);
  const standin = await startCniBackendStandIn();
  standin.ipFamily = family;
  t.after(() => standin.close());
  let node: Netns;
  let host: PluginHost;
  const ipamd = (s: string) => connectIpamd(s);
  if (side === 'netlink') {
    const n = await netlinkNode(t, mk);
    node = n.node;
    host = { ...n.side, ipamd };
  } else {
    node = await mk('n');
    host = { ip: LOCAL_IP, nodeNetns: node.path, ipamd };
  }
  await ipIn(node.path, ['addr', 'add', '10.0.0.10/32', 'dev', 'lo']);
  // The node's own IPv6 (as a node's primary ENI address), the source of its connections to IPv6 pods.
  if (family === 'ipv6') await ipIn(node.path, ['addr', 'add', 'fd00:10::10/128', 'dev', 'lo']);
  const conf = parseNetConf(
    JSON.stringify({
      cniVersion: '1.1.0',
      name: 'aws-cni',
      type: 'eni-ipam',
      ipamdSocket: standin.socket,
      ipFamily: family,
    }),
  );
  return { node, mk, standin, host, conf, family };
}

/** The CNI environment of one sandbox of pod `<namespace>/<name>` (`pod` '': a bare CNI call, no CNI_ARGS). */
const envOf = (command: string, id: string, netns: string, pod: string): CniEnv =>
  readCniEnv({
    CNI_COMMAND: command,
    CNI_CONTAINERID: id,
    CNI_NETNS: netns,
    CNI_IFNAME: 'eth0',
    CNI_PATH: '/opt/cni/bin',
    CNI_ARGS: pod ? `K8S_POD_NAMESPACE=default;K8S_POD_NAME=${pod};K8S_POD_INFRA_CONTAINER_ID=${id}` : '',
  });

interface Sandbox {
  id: string;
  pod: string;
  ns: Netns;
  /** The pod's address the node routes to it (IPv6 in `ipv6` mode). */
  ip: string;
  /** Its IPv4 ('' for an IPv6 pod: its egress address has no rules). */
  ipv4: string;
  prevResult: Record<string, unknown>;
}

/** ADD through the current plugin. */
async function addNew(w: World, pod: string, nsName: string): Promise<Sandbox> {
  const id = newId();
  const ns = await w.mk(nsName);
  const r = await cmdAdd(envOf('ADD', id, ns.path, pod), w.conf, [], { host: w.host });
  const ips = (r.result as { ips: Array<{ address: string }> }).ips.map((x) => x.address.split('/')[0]!);
  return {
    id,
    pod,
    ns,
    ip: ips.find((x) => (w.family === 'ipv6') === x.includes(':'))!,
    ipv4: w.family === 'ipv6' ? '' : ips.find((x) => !x.includes(':'))!,
    prevResult: r.result as Record<string, unknown>,
  };
}

/** ADD as the eni-ipam before this change made it (test/helpers/legacy-wiring.ts). */
async function addOld(w: World, pod: string, nsName: string): Promise<Sandbox> {
  const id = newId();
  const ns = await w.mk(nsName);
  const { plan, result } = await wireLegacy(envOf('ADD', id, ns.path, pod), w.conf, w.host, w.family);
  return { id, pod, ns, ip: w.family === 'ipv6' ? plan.ipv6! : plan.ipv4, ipv4: plan.ipv4, prevResult: result };
}

const check = (w: World, s: Sandbox) =>
  cmdCheck(envOf('CHECK', s.id, s.ns.path, s.pod), { ...w.conf, prevResult: s.prevResult }, { host: w.host });
const del = (w: World, s: Sandbox) =>
  cmdDel(envOf('DEL', s.id, s.ns.path, s.pod), { ...w.conf, prevResult: s.prevResult }, [], { host: w.host });
const gc = (w: World, keep: Sandbox[]) =>
  cmdGc({ ...w.conf, 'cni.dev/valid-attachments': keep.map((s) => ({ containerID: s.id, ifname: 'eth0' })) }, [], {
    host: w.host,
  });

/** The node side of `s` torn down as ipamd applies a spooled DEL (ipamd/cni-exec/spool-applier.ts). */
const spoolTeardown = (w: World, s: Sandbox) =>
  teardownAttachment({
    vethPrefix: 'eni',
    owner: { containerId: s.id, ifName: 'eth0', pod: { namespace: 'default', name: s.pod } },
    ...(s.ipv4 ? { ipv4: s.ipv4 } : {}),
    node: w.host,
  });

/** The device the node routes `ip` to (`ip route get`), or undefined. */
async function routeDev(w: World, ip: string): Promise<string | undefined> {
  const r = await ipj(w.node, ['route', 'get', ip]).catch(() => []);
  return r[0]?.dev as string | undefined;
}

/** IPv4 pod rules (prio 512/1536) naming `ip`. */
const rulesOf = async (w: World, ip: string) =>
  (await ipj(w.node, ['rule', 'show'])).filter((r) => r.dst === ip || r.src === ip);

/**
 * The node reaches `s`: its interface is there, and a TCP connection from the node to a
 * closed port of the pod is refused by the pod's kernel (an RST back through the host
 * veth) within 3 s, where an unreachable pod times out.
 */
async function reachable(w: World, s: Sandbox): Promise<boolean> {
  const up = await ipIn(s.ns.path, ['link', 'show', 'dev', 'eth0']).then(
    () => true,
    () => false,
  );
  if (!up) return false;
  const script = `exec 3<>/dev/tcp/${s.ip}/9`;
  return new Promise((resolve) =>
    execFile('nsenter', [`--net=${w.node.path}`, 'timeout', '3', 'bash', '-c', script], (err, _out, stderr) =>
      resolve(!err || /Connection refused/.test(stderr)),
    ),
  );
}

/** Waits (deadline 15 s: a loaded machine, an IPv6 address still in DAD) until the node reaches `s`. */
const assertReachable = (w: World, s: Sandbox, what = `${s.pod} reachable from the node`) =>
  waitFor(what, () => reachable(w, s), 15_000);

for (const family of ['ipv4', 'ipv6'] as const)
  for (const side of ['netlink', 'ip'] as const) {
    test(`${family}, ${side}: pods wired under the older names are checked, deleted and GC'd by the new plugin`, async (t) => {
      const w = await world(t, family, side);
      const a = await addOld(w, 'old-a', 'a');
      const b = await addOld(w, 'old-b', 'b');
      const c = await addNew(w, 'new-c', 'c');
      const d = await addOld(w, 'old-d', 'd');
      const links = await hostLinks(w.node);
      const oldName = legacyHostVethName('eni', a.id, 'eth0');
      assert.ok(links.has(oldName), 'pod a keeps the name it was wired under');
      assert.ok(links.has(podHostVethName('eni', 'default', 'new-c')), 'pod c gets the upstream name');
      assert.equal(links.size, family === 'ipv6' ? 8 : 4, [...links.keys()].join(' '));
      for (const s of [a, b, c, d]) {
        await assertReachable(w, s, `${s.pod} reachable from the node`);
        await check(w, s); // throws on drift
      }
      assert.equal(await routeDev(w, a.ip), oldName);

      await del(w, a);
      const afterDel = await hostLinks(w.node);
      assert.ok(
        ![...afterDel.keys()].some((n) => n === oldName || n === legacyHostVethName('eni', a.id, 'eth0/v4if0')),
      );
      assert.equal(afterDel.size, family === 'ipv6' ? 6 : 3, 'only pod a went');
      assert.equal(await routeDev(w, a.ip).then((dev) => dev === oldName), false);
      if (family === 'ipv4') assert.deepEqual(await rulesOf(w, a.ip), [], 'its rules went');
      // ipamd applies a DEL of pod d spooled while it was down.
      await spoolTeardown(w, d);
      const afterSpool = await hostLinks(w.node);
      assert.equal(afterSpool.size, family === 'ipv6' ? 4 : 2, 'only pod d went');
      assert.equal(afterSpool.has(legacyHostVethName('eni', d.id, 'eth0')), false);
      if (family === 'ipv4') assert.deepEqual(await rulesOf(w, d.ip), [], "pod d's rules went");
      for (const s of [b, c]) await assertReachable(w, s, `${s.pod} still reachable`);

      await gc(w, [c]);
      const afterGc = await hostLinks(w.node);
      assert.deepEqual(
        [...afterGc.keys()].sort(), // (GC releases d's address too; its veths were gone already)
        [
          hostVethName('eni', { containerId: c.id, ifName: 'eth0', pod: { namespace: 'default', name: 'new-c' } }),
          ...(family === 'ipv6' ? [egressVeth(c.id, 'eth0').hostVeth] : []),
        ].sort(),
        'GC took pod b (older names) and left pod c',
      );
      if (family === 'ipv4') assert.deepEqual(await rulesOf(w, b.ip), []);
      await assertReachable(w, c);
      await check(w, c);
      await del(w, c);
      assert.equal((await hostLinks(w.node)).size, 0);
    });

    test(`${family}, ${side}: a fast re-create: the newer sandbox takes the pod's name, the older one's GC and DEL leave it`, async (t) => {
      const w = await world(t, family, side);
      const name = podHostVethName('eni', 'default', 'web-0');
      const s1 = await addNew(w, 'web-0', 's1');
      assert.equal((await hostLinks(w.node)).get(name), hostVethMac(s1.id, 'eth0'));
      // The newer sandbox of the same pod before the older one's DEL: upstream deletes the old veth and makes its own.
      const s2 = await addNew(w, 'web-0', 's2');
      assert.equal((await hostLinks(w.node)).get(name), hostVethMac(s2.id, 'eth0'), 's2 holds the name');
      assert.equal(await reachable(w, s1), false, 's1 lost its interface with the veth');
      await assertReachable(w, s2);
      // The runtime's GC no longer lists s1: its addresses go, s2's veth stays.
      await gc(w, [s2]);
      assert.equal((await hostLinks(w.node)).get(name), hostVethMac(s2.id, 'eth0'), "GC of s1 left s2's veth");
      assert.equal(await routeDev(w, s2.ip), name);
      await assertReachable(w, s2);
      // Once more, and this time the older one's DEL comes late.
      const s3 = await addNew(w, 'web-0', 's3');
      await spoolTeardown(w, s2); // as ipamd applies s2's DEL spooled while it was down
      assert.equal((await hostLinks(w.node)).get(name), hostVethMac(s3.id, 'eth0'), "the spooled DEL left s3's veth");
      await del(w, s2);
      assert.equal((await hostLinks(w.node)).get(name), hostVethMac(s3.id, 'eth0'), "DEL of s2 left s3's veth");
      assert.equal(await routeDev(w, s3.ip), name);
      if (family === 'ipv4') assert.equal((await rulesOf(w, s3.ip)).length > 0, true, "s3's rules stay");
      await assertReachable(w, s3);
      await check(w, s3);
      await del(w, s3);
      assert.equal((await hostLinks(w.node)).size, 0);
    });

    test(`${family}, ${side}: CHECK and DEL without CNI_ARGS, and GC of a pod ipamd does not name, find the veth by its MAC`, async (t) => {
      const w = await world(t, family, side);
      const x = await addNew(w, 'web-1', 'x');
      const y = await addNew(w, 'web-2', 'y');
      const bare = { ...x, pod: '' };
      await check(w, bare); // throws on drift
      await del(w, bare);
      const left = await hostLinks(w.node);
      assert.deepEqual(
        [...left.keys()].filter((n) => n.startsWith('eni')),
        [podHostVethName('eni', 'default', 'web-2')],
      );
      assert.equal(left.size, family === 'ipv6' ? 2 : 1, "x's veths went, y's stay");
      await assertReachable(w, y);
      w.standin.pods.clear(); // an allocation ipamd adopted from the kernel: no pod known
      await gc(w, []);
      assert.equal((await hostLinks(w.node)).size, 0, "GC found y's veth by its MAC");
    });
  }
