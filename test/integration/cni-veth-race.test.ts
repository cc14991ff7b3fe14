/**
 * Two sandboxes of one pod racing on the host veth name they share (issue #39 item 1: the
 * name is the pod's, `<prefix>` + sha1(`<namespace>.<pod>`)[:11], not the sandbox's): the
 * older sandbox A's DEL and the newer sandbox A''s ADD at the same time, in real network
 * namespaces, through the plugin's verbs in this process against the ipamd stand-in, on
 * both node sides (ipamd's rtnetlink helper, `ip` batches) and in `ipv4` and `ipv6` mode.
 *
 * What must hold whatever the interleaving: A''s ADD ends with A' wired (it takes the name
 * over from A's veth, which may vanish under it), and A's DEL deletes only A's veth, never
 * A''s (identified by its MAC and ifindex, not by the name alone).
 *
 * - The interleaving that backed the names out of main (restore-races under load, `ip`
 *   path: "Cannot find device eni…" in A''s ADD): A's DEL read the node's links and saw
 *   its veth; A''s ADD then deleted that veth and made its own under the name; A's DEL
 *   then deleted by name, taking A''s. A gate on the DEL's node side holds its delete
 *   until the ADD is done, so the window is hit every run.
 * - The other way round: A''s ADD found the name taken and is held before it deletes the
 *   old veth while A's DEL runs whole; the ADD's delete finds nothing and it goes on.
 * - Many rounds of DEL(A) and ADD(A') started together, as a kubelet re-creating a pod.
 * - A's DEL comes late, with ipamd unreachable, when A' holds the address A had (ipamd
 *   released it from A and handed it out again): the rule cleanup by address sees a route
 *   to it on a device of A's veth's name, which is A''s, and leaves A''s rules.
 * Needs root.
 */
import assert from 'node:assert/strict';
import test from 'node:test';
import type { PluginHost } from '../../cni-plugin/host.js';
import type { NetlinkHelper } from '../../cni-plugin/netlink-helper.js';
import { hostVethMac, podHostVethName } from '../../cni-plugin/veth-name.js';
import type { IpRunner } from '../../netfacts/ip-batch.js';
import {
  addNew,
  assertReachable,
  check,
  del,
  hostLinks,
  routeDev,
  rulesOf,
  world,
  type Sandbox,
  type World,
} from '../helpers/veth-world.js';

const tag = `${process.pid}`;
const NAME = podHostVethName('eni', 'default', 'web-0');
/** Rounds of the concurrent DEL(A)/ADD(A') test per family and node side. */
const ROUNDS = Number(process.env.ENI_IPAM_VETH_RACE_ROUNDS ?? 12);

/** Holds the link deletes of one host until released; `reached` resolves when the first one arrives. */
interface Gate {
  reached: Promise<void>;
  release(): void;
  pass(): Promise<void>;
}

function gate(): Gate {
  let arrived!: () => void;
  let open!: () => void;
  const reached = new Promise<void>((r) => (arrived = r));
  const opened = new Promise<void>((r) => (open = r));
  return {
    reached,
    release: open,
    pass: async () => {
      arrived();
      await opened;
    },
  };
}

/**
 * `host` whose node-side link deletes (an `ip` line `link del …`, the helper's `dellink`
 * and `dellinks`) wait at `g` first; everything else (reads, creates, rules) goes straight
 * through to the real `ip` and helper.
 */
function gatedHost(host: PluginHost, g: Gate): PluginHost {
  const isDel = (lines: string[]) => lines.some((l) => l.startsWith('link del'));
  const ip: IpRunner = {
    runIp: async (flags, lines, netns, wantStdout, limits) => {
      if (isDel(lines)) await g.pass();
      return host.ip.runIp(flags, lines, netns, wantStdout, limits);
    },
    ipBatch: async (lines, netns) => {
      if (isDel(lines)) await g.pass();
      return host.ip.ipBatch(lines, netns);
    },
    openIpStream: (netns) => host.ip.openIpStream(netns),
  };
  const h = host.netlink;
  const netlink: NetlinkHelper | undefined = h && {
    ...h,
    delLink: async (name, mac) => {
      await g.pass();
      return h.delLink(name, mac);
    },
    delLinks: async (a, b, macs) => {
      await g.pass();
      return h.delLinks(a, b, macs);
    },
  };
  return { ...host, ip, ...(netlink ? { netlink } : {}) };
}

/** A' holds the pod's name with its own veth, the node routes A''s address to it, A' answers, CHECK passes. */
async function assertWired(w: World, s: Sandbox, what: string): Promise<void> {
  assert.equal((await hostLinks(w.node)).get(NAME), hostVethMac(s.id, 'eth0'), `${what}: ${s.ns.name} holds ${NAME}`);
  assert.equal(await routeDev(w, s.ip), NAME, `${what}: ${s.ip} routed to ${NAME}`);
  if (w.family === 'ipv4') assert.equal((await rulesOf(w, s.ip)).length > 0, true, `${what}: ${s.ip}'s rules`);
  await assertReachable(w, s, `${what}: ${s.ns.name} reachable from the node`);
  await check(w, s); // throws on drift
}

for (const family of ['ipv4', 'ipv6'] as const)
  for (const side of ['netlink', 'ip'] as const) {
    test(`${family}, ${side}: DEL(A) held between reading the links and deleting while ADD(A') takes the name over → A''s veth stays`, async (t) => {
      const w = await world(t, family, side, tag);
      const a = await addNew(w, 'web-0', 'a');
      const g = gate();
      const delA = del(w, a, gatedHost(w.host, g));
      await g.reached; // A's DEL saw its veth and is about to delete it
      const a2 = await addNew(w, 'web-0', 'a2'); // A' deletes A's veth and makes its own under the name
      g.release();
      await delA;
      await assertWired(w, a2, "after A's DEL");
      await del(w, a2);
      assert.equal((await hostLinks(w.node)).size, 0);
    });

    test(`${family}, ${side}: ADD(A') held before deleting A's veth while DEL(A) runs whole → A' wired`, async (t) => {
      const w = await world(t, family, side, tag);
      const a = await addNew(w, 'web-0', 'a');
      const g = gate();
      const addA2 = addNew(w, 'web-0', 'a2', gatedHost(w.host, g));
      await g.reached; // A' found the name taken and is about to delete the link under it
      await del(w, a); // A's DEL deletes it first
      g.release();
      const a2 = await addA2;
      await assertWired(w, a2, "after A''s ADD");
      await del(w, a2);
      assert.equal((await hostLinks(w.node)).size, 0);
    });

    if (family === 'ipv4')
      test(`${family}, ${side}: A's late DEL with ipamd unreachable while A' holds A's address under the same name → A''s rules stay`, async (t) => {
        const w = await world(t, family, side, tag);
        // ipamd released A's address (GC: sandbox gone) and handed it to A' on a secondary ENI's table.
        w.standin.addReply = () => ({ ipv4_addr: '10.0.5.77', device_number: 1, route_table_id: 3 });
        const a = await addNew(w, 'web-0', 'a');
        const a2 = await addNew(w, 'web-0', 'a2');
        assert.equal(a2.ip, a.ip);
        assert.equal((await rulesOf(w, a2.ip)).length, 2, "A''s rules: to-pod and from-pod");
        await w.standin.stop(); // A's DEL cleans up from its prevResult
        await del(w, a);
        assert.equal((await rulesOf(w, a2.ip)).length, 2, "A's DEL left A''s rules");
        assert.equal(await routeDev(w, a2.ip), NAME);
        await assertReachable(w, a2);
      });

    test(`${family}, ${side}: ${ROUNDS} rounds of DEL(A) and ADD(A') started together → each A' wired, no veth of A left`, async (t) => {
      const w = await world(t, family, side, tag);
      let cur = await addNew(w, 'web-0', 's0');
      for (let i = 1; i <= ROUNDS; i++) {
        const [, next] = await Promise.all([del(w, cur), addNew(w, 'web-0', `s${i}`)]);
        await assertWired(w, next, `round ${i}`);
        await cur.ns.remove(); // as the runtime does after the DEL
        assert.equal((await hostLinks(w.node)).size, family === 'ipv6' ? 2 : 1, `round ${i}: only A''s veths`);
        cur = next;
      }
      await del(w, cur);
      assert.equal((await hostLinks(w.node)).size, 0);
    });
  }
