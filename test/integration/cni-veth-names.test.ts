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
import test from 'node:test';
import { hostVethMac, hostVethName, legacyHostVethName, podHostVethName } from '../../cni-plugin/veth-name.js';
import { egressVeth } from '../../cni-plugin/wiring-plan.js';
import {
  addNew,
  addOld,
  assertReachable,
  check,
  del,
  gc,
  hostLinks,
  reachable,
  routeDev,
  rulesOf,
  spoolTeardown,
  world,
} from '../helpers/veth-world.js';

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
