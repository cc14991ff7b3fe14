/**
 * Waiter wake-up and the "before usable" hook (docs/design.md#10-the-warm-pool-at-depth item 2; host-network window),
 * in process (the coalesced pool steps after served ADDs and DELs, docs/design.md §16
 * item 4, are proved on virtual time in test/unit/ipam-service.test.ts): ipamd's real pool controller, ENI manager, datastore and ADD path
 * (IpamService), discovering the node and calling the simulated EC2 through the real
 * AWS SDK over HTTP. The hook stands in for host networking and is held open by the
 * test, so one ENI's arrival can be observed while another ENI's setup is still stuck.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { pino } from 'pino';
import { SimCloud } from '../../sim/index.js';
import { Datastore } from '../../ipamd/datastore/datastore.js';
import type { EniInfo } from '../../ipamd/datastore/types.js';
import { EniManager } from '../../ipamd/controller/eni-lifecycle/eni-manager.js';
import { PoolController } from '../../ipamd/controller/pool-loop/pool-controller.js';
import { ReleaseGate } from '../../ipamd/controller/release/release-gate.js';
import { IpamService, type AddResult } from '../../ipamd/service/ipam-service.js';
import { discoverNode, loadInventory, type NodeInventory } from '../../ipamd/startup/discover.js';
import { ensureDummyAwsCredentials } from '../../kit/sim-node.js';
import { waitFor } from '../../kit/wait.js';

const log = pino({ level: 'silent' });

interface Rig {
  sim: SimCloud;
  inv: NodeInventory;
  ds: Datastore;
  enis: EniManager;
  pool: PoolController;
  service: IpamService;
}

/** A started m5.large (3 ENIs × 9) with an empty pool that grows only for waiting ADDs (WARM_IP_TARGET=0). */
async function rig(
  t: { after(fn: () => Promise<void> | void): void },
  hook: (eni: EniInfo) => Promise<void>,
): Promise<Rig> {
  ensureDummyAwsCredentials();
  const sim = new SimCloud();
  await sim.start();
  const subnet = sim.addSubnet({ cidr: '10.0.0.0/24' });
  sim.launchInstance({ instanceType: 'm5.large', subnetId: subnet.subnetId });
  sim.faults.setAttachmentDelays({ attachMs: 300 });
  const inv = await discoverNode({ imdsEndpoint: sim.imdsEndpoint, ec2Endpoint: sim.ec2Endpoint, log });
  const ds = new Datastore(0);
  loadInventory(ds, inv, Date.now());
  const gate = new ReleaseGate();
  const enis = new EniManager({
    ec2: inv.ec2,
    ds,
    gate,
    log,
    additionalTags: {},
    unmanagedDeviceIndexes: new Set(),
    imds: inv.imds,
    beforeEniUsable: hook,
    instance: {
      instanceId: inv.instance.instanceId,
      subnetId: inv.primary.subnetId,
      subnetCidr: inv.primary.subnetCidr,
      securityGroupIds: [],
      maxEnis: 3,
      ipsPerEni: 9,
    },
  });
  const pool = new PoolController({
    ds,
    ec2: inv.ec2,
    enis,
    gate,
    log,
    targets: { warmEniTarget: 0, warmIpTarget: 0, maxEni: 3 },
    intervalMs: 60_000,
    shrinkDelayMs: 60_000,
    limits: { instanceType: 'm5.large', instanceMaxEnis: 3, ipv4PerEni: 10 },
  });
  const service = new IpamService({ ds, pool, persist: async () => undefined, log, addWaitTimeoutMs: 30_000 });
  pool.start();
  t.after(async () => {
    await pool.stop();
    inv.ec2.close();
    await sim.stop();
  });
  return { sim, inv, ds, enis, pool, service };
}

const key = (i: number) => ({ networkName: 'net', containerID: `c${i}`, ifName: 'eth0' });

test('waiters are served the moment one new ENI is usable, while another ENI of the same refill is still being set up', async (t) => {
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  const hooked: string[] = [];
  const r = await rig(t, async (eni) => {
    hooked.push(eni.eniId);
    if (hooked.length === 2) await held; // the second ENI's host networking hangs until the test lets go
  });
  // 20 ADDs on an empty pool: one refill = 9 on the primary ENI + two new ENIs (9 + 2), created in parallel.
  const results: AddResult[] = [];
  const adds = Array.from({ length: 20 }, (_, i) => r.service.add(key(i)).then((a) => void results.push(a)));
  await waitFor(
    'both ENIs attached and the first one usable',
    () => hooked.length === 2 && r.ds.listEnis().length === 2,
    20_000,
  );
  const first = r.ds.listEnis().find((e) => !e.isPrimary)!;
  const stuck = hooked.find((id) => id !== first.eniId)!;
  const firstSize = r.ds.eniIps(first.eniId).length;
  await waitFor(
    'the waiters the primary ENI and the first new ENI can serve',
    () => results.length === 9 + firstSize,
    10_000,
  );
  assert.equal(r.enis.pendingIds().includes(stuck), true, 'the ENI whose setup hangs stays pending');
  assert.equal(r.ds.getEni(stuck), undefined, 'no IP of an ENI whose setup has not finished is in the datastore');
  assert.equal(r.sim.countCalls('CreateNetworkInterface'), 2, 'one refill: two ENIs, no more');
  const devices = [...r.sim.state.enis.values()]
    .filter((e) => e.attachment)
    .map((e) => e.attachment!.deviceIndex)
    .sort();
  assert.deepEqual(devices, [0, 1, 2], 'each new ENI at its own device index');

  release();
  await Promise.all(adds);
  assert.equal(new Set(results.map((a) => a.allocation.ipv4)).size, 20);
  assert.ok(
    results.some((a) => a.eni.eniId === stuck),
    'the last waiters were served from the ENI once its setup finished',
  );
});

test('a failing "before usable" hook keeps the ENI pending and its IPs out of the pool until a retry succeeds', async (t) => {
  let fail = true;
  const r = await rig(t, async () => {
    if (fail) throw new Error('route table not writable');
  });
  const add = r.service.add(key(1)).catch((e: Error) => e);
  // The primary ENI gets the IP (one waiter, room on the primary): no ENI needed yet.
  await add;
  // Ask for an ENI directly, as a refill would.
  const info = await r.enis.createAndAttach(3);
  assert.equal(info, undefined, 'not adopted while the hook fails');
  const [pendingId] = r.enis.pendingIds();
  assert.ok(pendingId, 'the attached ENI is pending');
  assert.equal(r.ds.getEni(pendingId), undefined);
  assert.equal(r.ds.counts(Date.now()).available, 0, 'its 3 IPs are not available');
  // The reconcile retries (it adopts pending ENIs it finds attached and listed by IMDS).
  fail = false;
  const [described] = await r.inv.ec2.describeEnis([pendingId]);
  r.enis.adopt(described!);
  await waitFor('the ENI adopted after the hook succeeded', () => r.ds.getEni(pendingId) !== undefined, 10_000);
  assert.equal(r.ds.eniIps(pendingId).length, 3);
  assert.deepEqual(r.enis.pendingIds(), []);
});
