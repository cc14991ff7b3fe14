/**
 * The IPv6 and dual-stack wiring through ipamd's rtnetlink helper (cni-plugin/netlink-wiring.ts,
 * cni-plugin/netlink/eni-ipam-netlink6.c) against the `ip` batches of wiring.ts and
 * wiring-v6.ts, in real network namespaces: the kernel state must be the same (the /128
 * with its nodad flag, the IPv4 egress pair of an IPv6 pod, routes, neighbours, the host
 * veth's IPv6 sysctls), and a failure must leave nothing (a conflict on the /128, an
 * egress pair that cannot be made, a missing netns, abort). Needs root.
 */
import assert from 'node:assert/strict';
import test from 'node:test';
import { netlinkHelper } from '../../cni-plugin/netlink-helper.js';
import { startNetlinkWiring } from '../../cni-plugin/netlink-wiring.js';
import { deleteHostVethPair, IpConflictError, startWiring, type WiringPlan } from '../../cni-plugin/wiring.js';
import { egressVeth } from '../../cni-plugin/wiring-plan.js';
import { HOST_VETH_V6_SYSCTLS } from '../../cni-plugin/wiring-v6.js';
import { CniError } from '../../cni-plugin/errors.js';
import { LOCAL_IP } from '../../netfacts/ip-batch.js';
import { ipIn, netnsMaker, run, type Netns } from '../../kit/netns.js';
import { waitFor } from '../../kit/wait.js';
import { netlinkNode, NETLINK_HELPER, stripKeys } from '../helpers/netlink-node.js';

const HELPER = NETLINK_HELPER;
const tag = `${process.pid}`;
const IPV6 = '2600:1f14:abc:de01:1::9';

/** An `ipv6` plan (with its IPv4 egress pair) or a `dual` one in `pod`. */
const planIn = (pod: Netns, family: 'ipv6' | 'dual', hostVeth = 'enitest6a1b2c3'): WiringPlan => ({
  netns: pod.path,
  ifName: 'eth0',
  hostVeth,
  hostMac: '02:11:22:33:44:66',
  podMac: '02:66:77:88:99:bb',
  mtu: 9001,
  family,
  ipv4: family === 'dual' ? '10.77.0.9' : '',
  routeTableId: family === 'dual' ? 3 : 0,
  ipv6: IPV6,
  ...(family === 'ipv6'
    ? { egress: { ...egressVeth(hostVeth, 'eth0'), hostVeth: `${hostVeth}e` }, egressV4: '169.254.172.7' }
    : {}),
});

/** `ip -json -details` rows without what differs between two namespaces or moves on its own. */
const strip = (v: unknown): unknown =>
  stripKeys(v, [
    'ifindex',
    'link_index',
    'link_netnsid',
    'stats64',
    'operstate',
    'valid_life_time',
    'preferred_life_time',
  ]);

/**
 * The state the wiring leaves on both sides: links, every route of both families, the
 * rules, the pod's global addresses (flags included), the permanent neighbours, and the
 * host veth's IPv6 sysctls. Link-local addresses and other neighbour states are left out
 * (the kernel makes them on its own, on its own schedule).
 */
async function wiredState(node: Netns, pod: Netns, p: WiringPlan): Promise<string> {
  const j = async (ns: Netns, args: string[]) =>
    strip(JSON.parse((await ipIn(ns.path, ['-json', '-details', ...args])) || '[]'));
  const permanent = (rows: unknown) =>
    (rows as Array<{ state?: string[] }>).filter((r) => r.state?.includes('PERMANENT'));
  const sysctls = await run('nsenter', [
    `--net=${node.path}`,
    'sysctl',
    ...HOST_VETH_V6_SYSCTLS.map(([k]) => `net.ipv6.conf.${p.hostVeth}.${k}`),
  ]);
  return JSON.stringify(
    {
      hostLinks: await j(node, ['link', 'show', 'type', 'veth']),
      hostRoutes4: await j(node, ['-4', 'route', 'show', 'table', 'all']),
      hostRoutes6: await j(node, ['-6', 'route', 'show', 'table', 'main']),
      rules: await j(node, ['rule', 'show']),
      hostNeigh: permanent(await j(node, ['neigh', 'show'])),
      sysctls,
      podLinks: await j(pod, ['link', 'show']),
      podAddrs: await j(pod, ['addr', 'show', 'scope', 'global']),
      podRoutes4: await j(pod, ['-4', 'route', 'show', 'table', 'all']),
      podRoutes6: await j(pod, ['-6', 'route', 'show', 'table', 'main']),
      podNeigh: permanent(await j(pod, ['neigh', 'show'])),
    },
    null,
    1,
  );
}

for (const family of ['ipv6', 'dual'] as const) {
  test(`${family}: the netlink helper leaves the same kernel state as the ip batches`, async (t) => {
    const mk = netnsMaker(t, `n6${family[0]}`, tag);
    const [nodeA, podA, nodeB, podB] = [await mk('na'), await mk('pa'), await mk('nb'), await mk('pb')];
    const helper = netlinkHelper(HELPER, nodeB.path);
    t.after(() => helper.close());
    const viaIp = planIn(podA, family);
    await startWiring(viaIp, { ip: LOCAL_IP, nodeNetns: nodeA.path }).finish(viaIp);
    const viaNl = planIn(podB, family);
    const marks: string[] = [];
    const w = startNetlinkWiring(viaNl, { ip: LOCAL_IP, nodeNetns: nodeB.path }, helper, (m) => marks.push(m));
    await w.finish(viaNl);
    assert.deepEqual(marks.slice(0, 2), ['netns-checked', 'veth-up']);
    // The /128 is usable at once: nodad, never tentative.
    const addr6 = await ipIn(podB.path, ['-6', 'addr', 'show', 'dev', 'eth0', 'scope', 'global']);
    assert.match(addr6, new RegExp(`inet6 ${IPV6}/128 scope global nodad`));
    assert.doesNotMatch(addr6, /tentative/);
    if (family === 'ipv6')
      assert.match(await ipIn(podB.path, ['-4', 'addr', 'show', 'dev', 'v4if0']), /169\.254\.172\.7\/32/);
    // Both converge (links come up asynchronously); then they must be equal.
    const ipState = () => wiredState(nodeA, podA, viaIp);
    const nlState = () => wiredState(nodeB, podB, viaNl);
    await waitFor(
      'the two wirings to leave the same state',
      async () => ((await ipState()) === (await nlState()) ? true : undefined),
      15_000,
      100,
    ).catch(async () => assert.equal(await nlState(), await ipState()));
    assert.match(await nlState(), /"PERMANENT"/);
  });
}

test('IPv6 netlink wiring: a conflict on the /128, a failed egress pair, a missing netns, abort leave nothing', async (t) => {
  const mk = netnsMaker(t, 'n6f', tag);
  const { node, helper, side: withHelper } = await netlinkNode(t, mk);
  const side = { ip: withHelper.ip, nodeNetns: withHelper.nodeNetns }; // the ip path's node side, no helper
  const veths = async () => ipIn(node.path, ['-o', 'link', 'show', 'type', 'veth']);

  // A live IPv6 pod; a repeated ADD of it replaces both pairs.
  const pod = await mk('p');
  const live = planIn(pod, 'ipv6');
  await startNetlinkWiring(live, side, helper).finish(live);
  await startNetlinkWiring(live, side, helper).finish(live);
  assert.match(await ipIn(node.path, ['-6', 'route', 'show', `${IPV6}/128`]), new RegExp(`dev ${live.hostVeth}`));
  assert.equal((await veths()).trim().split('\n').length, 2, 'one pair and its egress pair');

  // Another ADD given the live pod's /128: refused, both its new pairs removed, the live route untouched.
  const pod2 = await mk('p2');
  const other = planIn(pod2, 'ipv6', 'enitest6other');
  await assert.rejects(
    startNetlinkWiring(other, side, helper).finish({ ...other, egressV4: '169.254.172.8' }),
    (e: unknown) => e instanceof IpConflictError && e.code === 11,
  );
  assert.match(await ipIn(node.path, ['-6', 'route', 'show', `${IPV6}/128`]), new RegExp(`dev ${live.hostVeth}`));
  assert.doesNotMatch(await veths(), /enitest6other/, 'the refused pairs are removed');

  // The egress pair cannot be made (the pod has a v4if0 already): CNI error 5, neither pair left.
  const pod3 = await mk('p3');
  await ipIn(pod3.path, ['link', 'add', 'v4if0', 'type', 'veth', 'peer', 'name', 'v4peer']);
  const bad = planIn(pod3, 'ipv6', 'enitest6bad01');
  await assert.rejects(
    startNetlinkWiring(bad, side, helper).finish(bad),
    (e: unknown) => e instanceof CniError && e.code === 5,
  );
  assert.doesNotMatch(await veths(), /enitest6bad01/);
  assert.doesNotMatch(await ipIn(pod3.path, ['link', 'show']), /eth0/);

  // A pod netns that does not exist: CNI error 5, nothing created.
  const gone = { ...planIn(pod2, 'dual', 'enitest6gone1'), netns: '/var/run/netns/n6f-missing-x' };
  await assert.rejects(
    startNetlinkWiring(gone, side, helper).finish(gone),
    (e: unknown) => e instanceof CniError && e.code === 5,
  );
  assert.doesNotMatch(await veths(), /enitest6gone1/);

  // Abort after stage 1 (ipamd gave no address): both pairs go.
  const pod4 = await mk('p4');
  const ab = planIn(pod4, 'ipv6', 'enitest6abrt1');
  const wa = startNetlinkWiring(ab, side, helper);
  await wa.abort();
  assert.doesNotMatch(await veths(), /enitest6abrt1/);
  assert.doesNotMatch(await ipIn(pod4.path, ['link', 'show']), /eth0|v4if0/);
  assert.equal((await veths()).trim().split('\n').length, 2, "only the live pod's pairs are left");
});

test("ip path: an ADD given a live pod's /128 is refused and the live route stays", async (t) => {
  const mk = netnsMaker(t, 'n6c', tag);
  const node = await mk('n');
  const side = { ip: LOCAL_IP, nodeNetns: node.path };
  const live = planIn(await mk('p'), 'dual');
  await startWiring(live, side).finish(live);
  const other = { ...planIn(await mk('p2'), 'dual', 'enitest6other'), ipv4: '10.77.0.10' };
  await assert.rejects(
    startWiring(other, side).finish(other),
    (e: unknown) => e instanceof IpConflictError && e.code === 11,
  );
  assert.match(await ipIn(node.path, ['-6', 'route', 'show', `${IPV6}/128`]), new RegExp(`dev ${live.hostVeth}`));
  assert.doesNotMatch(await ipIn(node.path, ['link', 'show']), /enitest6other/);
});

test("DEL of an IPv6 pod through the helper: both host veths in one batch, nobody else's; a second DEL finds nothing", async (t) => {
  const mk = netnsMaker(t, 'n6d', tag);
  const { node, helper, side } = await netlinkNode(t, mk);
  const other = planIn(await mk('p2'), 'ipv6', 'enitest6keep1');
  await startNetlinkWiring(other, side, helper).finish({
    ...other,
    ipv6: '2600:1f14:abc:de01:1::a',
    egressV4: '169.254.172.9',
  });
  const plan = planIn(await mk('p'), 'ipv6');
  await startNetlinkWiring(plan, side, helper).finish(plan);
  const veths = async () => ipIn(node.path, ['-o', 'link', 'show', 'type', 'veth']);
  const pair = [plan.hostVeth, plan.egress!.hostVeth] as const;
  const outcome = (r: PromiseSettledResult<boolean>[]) => r.map((x) => (x.status === 'fulfilled' ? x.value : 'failed'));
  assert.deepEqual(outcome(await deleteHostVethPair(...pair, side)), [true, true]);
  const left = await veths();
  for (const v of pair) assert.doesNotMatch(left, new RegExp(v));
  assert.match(left, /enitest6keep1/);
  assert.match(left, /enitest6keep1e/);
  assert.equal((await ipIn(node.path, ['-6', 'route', 'show', `${IPV6}/128`])).trim(), '');
  assert.equal(
    (await ipIn(node.path, ['-o', 'link', 'show', 'group', '0'])).trim().split('\n').length,
    3,
    "lo and the other pod's two host veths, group 0",
  );
  // Gone already: nothing to delete, no failure.
  assert.deepEqual(outcome(await deleteHostVethPair(...pair, side)), [false, false]);
  // One of the two gone: the other is still deleted (one by one).
  assert.deepEqual(outcome(await deleteHostVethPair('enitest6nope1', other.egress!.hostVeth, side)), [false, true]);
  assert.match(await veths(), /enitest6keep1@/);
});
