/**
 * ADD's wiring through ipamd's rtnetlink helper (cni-plugin/netlink-wiring.ts,
 * cni-plugin/netlink/eni-ipam-netlink.c) against the `ip` batches it replaces
 * (cni-plugin/wiring.ts), in real network namespaces: the kernel state must be the same
 * (links, routes, rules, addresses, neighbours, as `ip -json` shows them to CHECK, DEL and
 * GC), and so must the failure handling: a repeated ADD, a conflict with a live pod's
 * route (its route and rules untouched), stale rules of an earlier holder, a missing pod
 * netns (nothing left), and a helper that exits (requests fail, the next one restarts it).
 * Needs root.
 */
import assert from 'node:assert/strict';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import test from 'node:test';
import { isDeepStrictEqual } from 'node:util';
import { netlinkHelper, type NetlinkHelper } from '../../cni-plugin/netlink-helper.js';
import { startNetlinkWiring } from '../../cni-plugin/netlink-wiring.js';
import { deleteHostVeth, IpConflictError, startWiring, type WiringPlan } from '../../cni-plugin/wiring.js';
import { teardownHost } from '../../cni-plugin/host-teardown.js';
import { CniError } from '../../cni-plugin/errors.js';
import { LOCAL_IP } from '../../netfacts/ip-batch.js';
import { ipIn, netnsMaker, type Netns } from '../../kit/netns.js';
import { alive } from '../../kit/host-scan.js';
import { waitFor } from '../../kit/wait.js';
import { netlinkNode, NETLINK_HELPER, stripKeys } from '../helpers/netlink-node.js';
import pino from 'pino';
import { BUNDLED_NETLINK_HELPER, chooseNetlinkHelper } from '../../ipamd/cni-exec/netlink-start.js';

const HELPER = NETLINK_HELPER;
const tag = `${process.pid}`;

const planIn = (pod: Netns, ipv4 = '10.77.0.9', routeTableId = 3): WiringPlan => ({
  netns: pod.path,
  ifName: 'eth0',
  hostVeth: 'enitest0a1b2c3',
  hostMac: '02:11:22:33:44:55',
  podMac: '02:66:77:88:99:aa',
  mtu: 9001,
  ipv4,
  routeTableId,
});

/**
 * The state ADD leaves, as `ip -json` shows it, without what differs between two
 * namespaces (indexes, netns ids) and `operstate`, which the kernel moves to UP
 * asynchronously (linkwatch; polled separately). IPv4 routes only: the IPv6 link-local
 * and `::1` routes are the kernel's own, added when addrconf runs (seconds later under
 * load), and IPv4 wiring sets none (the IPv6 file compares those wirings).
 */
async function wiredState(node: Netns, pod: Netns, hostVeth: string): Promise<unknown> {
  const strip = (v: unknown): unknown =>
    stripKeys(v, ['ifindex', 'link_index', 'link_netnsid', 'stats64', 'inet6_addr_gen_mode', 'operstate']);
  const j = async (ns: Netns, args: string[]) =>
    strip(JSON.parse((await ipIn(ns.path, ['-json', '-details', ...args])) || '[]'));
  const v4 = (rows: unknown) => (rows as Array<{ family?: string }>).filter((r) => r.family !== 'inet6');
  return {
    hostLink: await j(node, ['link', 'show', 'dev', hostVeth]),
    hostRoutes: await j(node, ['-4', 'route', 'show', 'table', 'all']),
    rules: await j(node, ['rule', 'show']),
    podLinks: await j(pod, ['link', 'show']),
    podAddrs: (await j(pod, ['-4', 'addr', 'show'])) as unknown,
    podRoutes: await j(pod, ['-4', 'route', 'show', 'table', 'all']),
    podNeigh: v4(await j(pod, ['neigh', 'show'])),
  };
}

test('the netlink helper leaves the same kernel state as the ip batches', async (t) => {
  const mk = netnsMaker(t, 'nlw', tag);
  const [nodeA, podA, nodeB, podB] = [await mk('na'), await mk('pa'), await mk('nb'), await mk('pb')];
  const helper = netlinkHelper(HELPER, nodeB.path);
  t.after(() => helper.close());
  for (const table of [3, 254]) {
    const viaIp = planIn(podA, '10.77.0.9', table);
    const w1 = startWiring(viaIp, { ip: LOCAL_IP, nodeNetns: nodeA.path });
    await w1.finish(viaIp);
    const viaNl = planIn(podB, '10.77.0.9', table);
    const marks: string[] = [];
    const w2 = startNetlinkWiring(viaNl, { ip: LOCAL_IP, nodeNetns: nodeB.path }, helper, (m) => marks.push(m));
    await w2.finish(viaNl);
    // Both converge (links come up asynchronously); then they must be equal.
    const states = async (): Promise<[unknown, unknown]> => [
      await wiredState(nodeB, podB, viaNl.hostVeth),
      await wiredState(nodeA, podA, viaIp.hostVeth),
    ];
    const same = async () => isDeepStrictEqual(...(await states())) || undefined;
    await waitFor('the two wirings to leave the same state', same, 15_000, 100).catch(() => undefined);
    const [nl, byIp] = await states();
    assert.deepEqual(nl, byIp, `table ${table}`);
    assert.deepEqual(marks.slice(0, 2), ['netns-checked', 'veth-up']);
    await waitFor(
      "the host veth's operstate to reach UP",
      async () => /state UP/.test(await ipIn(nodeB.path, ['link', 'show', 'dev', viaNl.hostVeth])),
      5000,
      20,
    );
    assert.deepEqual(marks.slice(2).sort(), ['host-exited', 'pod-exited']);
    // Undo both the same way (what DEL does) before the next table.
    for (const [node, p] of [
      [nodeA, viaIp],
      [nodeB, viaNl],
    ] as const) {
      await ipIn(node.path, ['link', 'del', 'dev', p.hostVeth]);
      await ipIn(node.path, ['rule', 'del', 'prio', '512']);
      if (table !== 254) await ipIn(node.path, ['rule', 'del', 'prio', '1536']);
    }
  }
});

test('netlink wiring: a repeated ADD, stale rules, a conflict, a missing netns, abort', async (t) => {
  const mk = netnsMaker(t, 'nlf', tag);
  const { node, helper, side: withHelper } = await netlinkNode(t, mk);
  const side = { ip: withHelper.ip, nodeNetns: withHelper.nodeNetns }; // the ip path's node side, no helper

  // Repeated ADD of the same attachment: the old veth is replaced.
  const pod = await mk('p');
  const plan = planIn(pod);
  await startNetlinkWiring(plan, side, helper).finish(plan);
  await ipIn(node.path, ['route', 'del', `${plan.ipv4}/32`]); // as if the first ADD's route was lost...
  await startNetlinkWiring(plan, side, helper).finish(plan); // ...its rules are still there: replaced
  const rules = (await ipIn(node.path, ['rule', 'show'])).split('\n').filter((l) => l.includes(plan.ipv4));
  assert.equal(rules.length, 2, rules.join('\n'));
  assert.match(await ipIn(node.path, ['route', 'show', `${plan.ipv4}/32`]), new RegExp(`dev ${plan.hostVeth}`));
  assert.match(await ipIn(pod.path, ['-4', 'addr', 'show', 'dev', 'eth0']), /10\.77\.0\.9\/32/);

  // Conflict: the node routes another IP to a live pod; an ADD given that IP is refused, the live pod untouched.
  const pod2 = await mk('p2');
  const other = { ...planIn(pod2), hostVeth: 'enitestother01' };
  const w = startNetlinkWiring(other, side, helper);
  await assert.rejects(w.finish(other), (e: unknown) => e instanceof IpConflictError && e.code === 11);
  assert.match(await ipIn(node.path, ['route', 'show', `${plan.ipv4}/32`]), new RegExp(`dev ${plan.hostVeth}`));
  assert.equal(
    (await ipIn(node.path, ['rule', 'show'])).split('\n').filter((l) => l.includes(plan.ipv4)).length,
    2,
    "the live pod's rules stay",
  );
  assert.doesNotMatch(await ipIn(node.path, ['link', 'show']), /enitestother01/, 'the refused veth is removed');

  // A pod netns that does not exist: CNI error 5, nothing created.
  const gone = { ...planIn(pod2), netns: '/var/run/netns/nlf-missing-x', hostVeth: 'enitestgone001' };
  const wg = startNetlinkWiring(gone, side, helper);
  await assert.rejects(wg.finish(gone), (e: unknown) => e instanceof CniError && e.code === 5);
  assert.doesNotMatch(await ipIn(node.path, ['link', 'show']), /enitestgone001/);

  // Abort after stage 1 (ipamd gave no IP): the veth goes.
  const pod3 = await mk('p3');
  const ab = { ...planIn(pod3, '10.77.0.10'), hostVeth: 'enitestabort01' };
  const wa = startNetlinkWiring(ab, side, helper);
  await wa.abort();
  assert.doesNotMatch(await ipIn(node.path, ['link', 'show']), /enitestabort01/);
  assert.doesNotMatch(await ipIn(pod3.path, ['link', 'show']), /eth0/);
});

test('DEL through the netlink helper: veth and rules go, a second DEL finds nothing and is fine', async (t) => {
  const mk = netnsMaker(t, 'nld', tag);
  const { node, helper, side } = await netlinkNode(t, mk);
  const pod = await mk('p');
  const plan = planIn(pod);
  await startNetlinkWiring(plan, side, helper).finish(plan);
  const rulesFor = async () =>
    (await ipIn(node.path, ['rule', 'show'])).split('\n').filter((l) => l.includes(plan.ipv4));
  assert.equal((await rulesFor()).length, 2);
  for (const round of [1, 2]) {
    assert.equal(await deleteHostVeth(plan.hostVeth, side), round === 1, `round ${round}: the veth existed`);
    assert.deepEqual(await teardownHost({ ipv4: plan.ipv4, node: side, plan }), []);
    assert.deepEqual(await rulesFor(), []);
    assert.deepEqual(JSON.parse(await ipIn(node.path, ['-json', 'link', 'show', 'type', 'veth'])), []);
    assert.equal((await ipIn(node.path, ['route', 'show', `${plan.ipv4}/32`])).trim(), '');
  }
  // Another failure than "gone" is reported, not swallowed.
  await assert.rejects(helper.delLink('bad/name'), /Invalid argument/);
});

test('a helper that exits fails its requests, and the next request starts it again', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'nl-helper-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const once = path.join(dir, 'once.sh');
  // Answers its first request, then exits before answering the second.
  await writeFile(once, '#!/bin/sh\nread id rest\necho "$id ok"\nread id rest\nexit 3\n');
  await chmod(once, 0o755);
  const h: NetlinkHelper = netlinkHelper(once);
  t.after(() => h.close());
  const addr = { netns: '/x', ifName: 'eth0', ipv4: '10.0.0.1' };
  await h.addr(addr);
  await assert.rejects(h.addr(addr), /exited \(3\)/);
  await h.addr(addr); // a new process
  await assert.rejects(netlinkHelper(path.join(dir, 'missing')).addr(addr), /could not run/);
  await assert.rejects(h.addr({ ...addr, ifName: 'eth 0' }), /invalid ifName/);

  // A helper that never answers: the request fails at its deadline and the helper is killed.
  const mute = path.join(dir, 'mute.sh');
  await writeFile(mute, `#!/bin/sh\necho $$ > ${dir}/mute.pid\nexec sleep 60\n`);
  await chmod(mute, 0o755);
  const m = netlinkHelper(mute, undefined, { timeoutMs: 300 });
  t.after(() => m.close());
  await assert.rejects(m.addr(addr), /did not answer within 300 ms/);
  const pid = Number(await readFile(path.join(dir, 'mute.pid'), 'utf8'));
  await waitFor('the mute helper was killed', async () => (alive(pid) ? undefined : true), 5000, 20);

  // A slow helper that keeps answering, in order: a queue longer than the deadline is progress,
  // not a stuck helper (the deadline runs from the last answer). 12 answers × 0.3 s > 1.5 s.
  const slow = path.join(dir, 'slow.sh');
  await writeFile(slow, '#!/bin/sh\nwhile read id rest; do sleep 0.3; echo "$id ok"; done\n');
  await chmod(slow, 0o755);
  const sl = netlinkHelper(slow, undefined, { timeoutMs: 1500 });
  t.after(() => sl.close());
  const t0 = Date.now();
  const burst = await Promise.allSettled(Array.from({ length: 12 }, () => sl.addr(addr)));
  const failed = burst.filter((r) => r.status === 'rejected').map((r) => String((r as PromiseRejectedResult).reason));
  assert.deepEqual(failed, [], `a queue of 12 behind a helper that answers every 0.3 s (${Date.now() - t0} ms in all)`);
});

test('the exec server uses the helper built beside the shim; none when told so or when it is missing', async (t) => {
  const warned: unknown[] = [];
  const log = pino({ level: 'warn' }, { write: (l: string) => warned.push(JSON.parse(l)) });
  const built = await chooseNetlinkHelper(undefined, undefined, log);
  assert.ok(built, 'the build has dist/cni-plugin/eni-ipam-netlink');
  t.after(() => built.close());
  assert.equal(BUNDLED_NETLINK_HELPER, HELPER);
  assert.equal(await chooseNetlinkHelper(false, undefined, log), undefined);
  assert.equal(warned.length, 0);
  assert.equal(await chooseNetlinkHelper('/nonexistent/eni-ipam-netlink', undefined, log), undefined);
  assert.match(JSON.stringify(warned), /no netlink helper, pods are wired with ip batches/);
  // One that cannot enter the node netns exits at once: not used either.
  assert.equal(await chooseNetlinkHelper(undefined, '/nonexistent/netns', log), undefined);
  const last = warned.at(-1) as { msg: string; err: string };
  assert.match(last.msg, /the netlink helper does not run, pods are wired with ip batches/);
  assert.match(last.err, /cannot enter the node netns/);
});

test('one netlink helper per process and node netns: shared by the exec servers, ended by the last', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'nl-shared-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const script = path.join(dir, 'helper.sh');
  // Records each start, answers every request until its stdin closes.
  await writeFile(script, `#!/bin/sh\necho $$ >> ${dir}/pids\nwhile read id rest; do echo "$id ok"; done\n`);
  await chmod(script, 0o755);
  const log = pino({ level: 'silent' });
  const [a, b] = await Promise.all([
    chooseNetlinkHelper(script, undefined, log),
    chooseNetlinkHelper(script, undefined, log),
  ]);
  assert.ok(a && b);
  const pids = async () => (await readFile(path.join(dir, 'pids'), 'utf8')).trim().split('\n').map(Number);
  assert.equal((await pids()).length, 1, 'one process for both');
  const [pid] = await pids();
  a.close();
  a.close(); // twice: counted once
  await b.ping();
  assert.ok(alive(pid!), 'running while a user is left');
  b.close();
  await waitFor('the helper ended with its last user', async () => (alive(pid!) ? undefined : true), 5000, 20);
  const c = await chooseNetlinkHelper(script, undefined, log);
  assert.ok(c);
  t.after(() => c.close());
  assert.equal((await pids()).length, 2, 'a new process once the last one ended');
});
