/**
 * docs/design.md#9-restore-sources-and-the-nothing-lost-check, leak GC and idempotent DEL against a real containerd: 200 ADD/DEL cycles
 * with dropped DELs, failed ADDs and netns-less removals converge to `assigned == live`
 * within one GC pass without a restart, and repeated, unknown or unreachable DELs
 * release an address exactly once. Each test ends with the "nothing lost" check.
 *
 * The 200 cycles run the real plugin binary by hand (kit/cni-exec.ts) in the node
 * netns, into pod netns the test creates, the way containerd would (ADD, then DEL with
 * the netns, then DEL with CNI_NETNS=""): containerd adds ~0.3 s per cycle and nothing
 * ipamd can observe. A dropped DEL is a sandbox whose netns is removed with no DEL at all;
 * a failed ADD is an ADD into a netns that vanished (the plugin rolls back, containerd then
 * DELs); an empty-netns removal is a netns gone before the only DEL, which has CNI_NETNS="". The pods that must survive are real CRI sandboxes.
 * Needs root and `scripts/ensure-deps.sh --containerd`.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { execPlugin, type CniCall, type CniOutcome } from '../../kit/cni-exec.js';
import { createNamedNetns, type Netns } from '../../kit/netns.js';
import { createContainerdNode, type ContainerdNode, type RunningPod } from '../../kit/containerd-node.js';
import { cniLog, releases } from '../helpers/restore-logs.js';

/** Runs the plugin in the node netns with the node's network configuration. */
function plugin(n: ContainerdNode, c: Omit<CniCall, 'config' | 'prefix'>): Promise<CniOutcome> {
  return execPlugin({ ...c, config: n.pluginConf, prefix: ['nsenter', `--net=${n.nodeNetns.path}`] });
}

/** CNI_ARGS as containerd 1.6 sends them. */
function podArgs(id: string, name: string): Record<string, string> {
  return {
    IgnoreUnknown: '1',
    K8S_POD_NAMESPACE: 'cycles',
    K8S_POD_NAME: name,
    K8S_POD_INFRA_CONTAINER_ID: id,
    K8S_POD_UID: randomUUID(),
  };
}

/** What happens to one cycle's sandbox. */
type Fate = 'normal' | 'dropped-del' | 'add-fails' | 'empty-netns';

/** 10 % dropped DELs, 5 % failed ADDs, 5 % removed with an empty netns, the rest normal. */
function fateOf(i: number): Fate {
  const k = i % 20;
  return k < 2 ? 'dropped-del' : k === 2 ? 'add-fails' : k === 3 ? 'empty-netns' : 'normal';
}

let seq = 0;

/** One ADD/DEL cycle of a sandbox that is not a CRI sandbox. Returns the container id. */
async function cycle(n: ContainerdNode, i: number, fate: Fate): Promise<string> {
  const id = randomBytes(32).toString('hex');
  const args = podArgs(id, `c-${i}`);
  const ns: Netns = await createNamedNetns(`eni-rs-c${process.pid}-${seq++}`);
  try {
    if (fate === 'add-fails') {
      // The netns vanishes between its creation and the plugin's wiring: ipamd has assigned, wiring fails.
      await ns.remove();
      const add = await plugin(n, { command: 'ADD', containerId: id, netns: ns.path, args });
      assert.notEqual(add.code, 0, `ADD into a vanished netns must fail: ${add.stdout}`);
      // containerd follows a failed ADD with a DEL at once.
      const del = await plugin(n, { command: 'DEL', containerId: id, netns: ns.path, args });
      assert.equal(del.code, 0, `DEL after the failed ADD: ${del.stdout}`);
      return id;
    }
    const add = await plugin(n, { command: 'ADD', containerId: id, netns: ns.path, args });
    assert.equal(add.code, 0, `ADD ${i}: ${add.stdout} ${add.stderr}`);
    if (fate === 'dropped-del') return id; // the sandbox goes away (netns removed below); ipamd is never told
    if (fate === 'normal') {
      const del = await plugin(n, { command: 'DEL', containerId: id, netns: ns.path, args });
      assert.equal(del.code, 0, `DEL ${i}: ${del.stdout}`);
    } else {
      await ns.remove(); // the netns is gone before the runtime gets to the DEL
    }
    // containerd's second DEL (RemovePodSandbox, CNI_NETNS=""); after a normal DEL it changes nothing at
    // ipamd, so only every 4th normal cycle repeats it (each plugin run costs ~0.1-0.2 s of CPU).
    if (fate === 'empty-netns' || i % 4 === 0) {
      const del2 = await plugin(n, { command: 'DEL', containerId: id, netns: '', args });
      assert.equal(del2.code, 0, `DEL ${i} with an empty netns: ${del2.stdout}`);
    }
    return id;
  } finally {
    await ns.remove();
    n.touch();
  }
}

test('200 ADD/DEL cycles with dropped DELs, failed ADDs and empty-netns removals → assigned == live after one GC pass', async (t) => {
  // A short cooldown keeps 27 secondary IPs (m5.large) enough for 200 cycles in ~a minute; it also makes reuse quick.
  const n = await createContainerdNode({ ipamdEnv: { WARM_IP_TARGET: '4', IP_COOLDOWN_PERIOD: '1s' } });
  t.after(() => n.close());
  const live: RunningPod[] = [];
  for (let i = 0; i < 4; i++) live.push(await n.runPod(`keep-${i}`));

  const t0 = Date.now();
  const fates = new Map<string, Fate>();
  let next = 0;
  const worker = async (): Promise<void> => {
    for (let i = next++; i < 200; i = next++) {
      const fate = fateOf(i);
      fates.set(await cycle(n, i, fate), fate);
      if (i % 50 === 25) live.push(await n.runPod(`keep-mid-${i}`)); // real pods started while leaks pile up
    }
  };
  await Promise.all([worker(), worker(), worker(), worker()]);
  t.diagnostic(`200 cycles through the plugin binary in ${Date.now() - t0} ms`);
  const count = (f: Fate) => [...fates.values()].filter((x) => x === f).length;
  assert.deepEqual(
    [count('normal'), count('dropped-del'), count('add-fails'), count('empty-netns')],
    [160, 20, 10, 10],
  );

  await n.assertNothingLost();
  // The 20 sandboxes whose DEL was dropped were released by the GC; every other cycle by its own DEL,
  // except that an empty-netns removal whose only DEL came later than ENI_IPAM_GC_GRACE (2 s: a
  // loaded machine) may be the GC's too, since its netns and veth were gone. Each exactly once (below).
  const rel = await releases(n.ipamdLog);
  const gc = rel.filter((l) => l.msg.startsWith('GC:'));
  assert.deepEqual(
    gc.map((l) => fates.get(l.containerID ?? '')).filter((f) => f !== 'dropped-del' && f !== 'empty-netns'),
    [],
    'the GC released only sandboxes whose netns was gone',
  );
  const gcDropped = new Set(gc.map((l) => l.containerID).filter((id) => fates.get(id ?? '') === 'dropped-del'));
  assert.equal(gcDropped.size, 20, 'the GC released each dropped-DEL sandbox');
  const liveIds = new Set(live.map((p) => p.id));
  assert.deepEqual(
    rel.filter((l) => liveIds.has(l.containerID ?? '')),
    [],
    'nothing live was released',
  );
  const perContainer = new Map<string, number>();
  for (const l of rel) perContainer.set(l.containerID ?? '', (perContainer.get(l.containerID ?? '') ?? 0) + 1);
  assert.deepEqual(
    [...perContainer.entries()].filter(([, k]) => k !== 1),
    [],
    'each container released exactly once',
  );
  assert.equal(perContainer.size, 200, 'every cycle released exactly once (DEL, add-failed rollback or GC)');
});

test('DEL three times, DEL unknown, DEL with ipamd stopped → exactly one release each, no other IP changes', async (t) => {
  const n = await createContainerdNode({ ipamdEnv: { WARM_IP_TARGET: '2' } });
  t.after(() => n.close());
  const a = await n.runPod('del-a');
  const bystander = await n.runPod('del-b');
  const c = await n.runPod('del-c');
  const args = podArgs(a.id, a.name);
  const before = await n.allocations();

  // containerd: Stop (DEL with the netns), Stop again, Remove (its own Stop + DEL, empty netns); then a DEL by hand.
  const delsOfA = async () => (await cniLog(n.cniLog, a.id)).filter((l) => l.verb === 'DEL');
  const steps: string[] = [];
  await n.stopPod(a.id);
  steps.push(`StopPodSandbox → ${(await delsOfA()).length}`);
  await n.cri.stopPodSandbox(a.id);
  steps.push(`StopPodSandbox again → ${(await delsOfA()).length}`);
  await n.cri.removePodSandbox(a.id);
  n.pods.delete(a.id);
  steps.push(`RemovePodSandbox → ${(await delsOfA()).length}`);
  const extra = await plugin(n, { command: 'DEL', containerId: a.id, netns: '', args });
  assert.equal(extra.code, 0);
  const unknown = randomBytes(32).toString('hex');
  const delUnknown = await plugin(n, {
    command: 'DEL',
    containerId: unknown,
    netns: `/var/run/netns/cni-${randomUUID()}`,
    args: podArgs(unknown, 'nobody'),
  });
  assert.equal(delUnknown.code, 0, `DEL of an unknown container succeeds: ${delUnknown.stdout}`);

  const aDels = await delsOfA();
  t.diagnostic(
    `cumulative CNI DELs containerd sent for one pod: ${steps.join('; ')}; netns ${JSON.stringify(aDels.map((l) => l.netns))}`,
  );
  assert.ok(aDels.length >= 3 && aDels.every((l) => l.outcome === 'ok'), JSON.stringify(aDels));
  assert.equal(aDels.filter((l) => l.ip).length, 1, 'exactly one DEL reported the released IP');
  let rel = await releases(n.ipamdLog);
  assert.deepEqual(
    rel.map((l) => [l.containerID, l.ip]),
    [[a.id, a.ip]],
    "one release, of A's IP",
  );
  const s = await n.status();
  assert.equal(s.counts.cooling, 1, "A's IP went to cooldown once");
  const after = await n.allocations();
  assert.deepEqual(
    after.map((x) => [x.containerID, x.ipv4]).sort(),
    before
      .filter((x) => x.containerID !== a.id)
      .map((x) => [x.containerID, x.ipv4])
      .sort(),
    'no other allocation changed',
  );

  // ipamd down: the runtime removes C; the plugin tears down what it can and reports success.
  await n.stopIpamd();
  await n.removePod(c.id);
  const cDels = (await cniLog(n.cniLog, c.id)).filter((l) => l.verb === 'DEL');
  assert.ok(cDels.length >= 2 && cDels.every((l) => l.outcome === 'ok'), JSON.stringify(cDels));
  assert.ok(
    cDels.some((l) => (l.warnings ?? []).some((w) => w.includes('ipamd not reached'))),
    JSON.stringify(cDels),
  );
  await n.startIpamd();
  await n.assertNothingLost();
  rel = await releases(n.ipamdLog);
  assert.equal(rel.filter((l) => l.containerID === c.id).length, 1, 'C released once, by the GC after the restart');
  assert.equal(rel.filter((l) => l.containerID === a.id).length, 1, 'A still released once');
  assert.deepEqual(
    rel.filter((l) => l.containerID === bystander.id),
    [],
    'the bystander was never released',
  );
});
