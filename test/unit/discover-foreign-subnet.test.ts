/**
 * Discovery at an ipamd (re)start against the simulated cloud (real Ec2Api over HTTP, real
 * IMDS reads): an attached ENI of ours in another subnet than the node's (custom
 * networking: 100.64.0.0/19 in the VPC's secondary block) enters the datastore with its
 * own subnet's CIDR (its route table's gateway and prefix length come from it), every
 * VPC CIDR block reaches host networking, and a block associated later is there at the
 * next start. Also when IMDS lists the ENI late.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { pino } from 'pino';
import { buildNode } from '../../kit/node.js';
import { Ec2Api } from '../../ipamd/cloud/ec2.js';
import { Datastore } from '../../ipamd/datastore/datastore.js';
import { discoverNode, loadInventory } from '../../ipamd/startup/discover.js';
import { subnetGateway } from '../../ipamd/network/eni-links.js';
import { ensureDummyAwsCredentials } from '../../kit/sim-node.js';

const log = pino({ level: 'silent' });
const TAG_INSTANCE = 'node.k8s.amazonaws.com/instance_id';

async function setup(t: { after(fn: () => Promise<void> | void): void }) {
  ensureDummyAwsCredentials();
  const k = await buildNode({
    simOptions: { secondaryVpcCidrs: ['100.64.0.0/16'] },
    extraSubnets: [{ cidr: '100.64.0.0/19' }],
    dirPrefix: 'eni-ipam-discover-',
  });
  t.after(() => k.close());
  const sim = k.sim;
  const node = sim.state.subnets.get(k.subnetId)!;
  const pods = k.extraSubnets[0]!;
  const inst = { instanceId: k.instanceId };
  const ec2 = new Ec2Api({ region: 'us-west-2', endpoint: sim.ec2Endpoint, backoff: { baseMs: 10, capMs: 20 } });
  t.after(() => ec2.close());
  /** Creates an ENI of ours in the pods' subnet and attaches it at device 1 (a previous ipamd's work). */
  const foreignEni = async () => {
    const eni = await ec2.createEni({
      subnetId: pods.subnetId,
      description: `aws-K8S-${inst.instanceId}`,
      secondaryCount: 3,
      tags: { [TAG_INSTANCE]: inst.instanceId, 'node.k8s.amazonaws.com/createdAt': new Date().toISOString() },
    });
    await ec2.attachEni(eni.eniId, inst.instanceId, 1);
    return eni;
  };
  const discover = async (o: { retries?: number } = {}) => {
    const inv = await discoverNode({
      imdsEndpoint: sim.imdsEndpointFor(inst.instanceId),
      ec2Endpoint: sim.ec2Endpoint,
      log,
      retries: o.retries ?? 6,
    });
    t.after(() => inv.ec2.close());
    const ds = new Datastore(30_000);
    loadInventory(ds, inv, Date.now());
    return { inv, ds };
  };
  return { sim, node, pods, foreignEni, discover };
}

test('a restart puts an ENI of another subnet in the datastore with that subnet CIDR, and all VPC blocks', async (t) => {
  const { sim, pods, foreignEni, discover } = await setup(t);
  const eni = await foreignEni();
  const { inv, ds } = await discover();
  assert.equal(ds.getEni(eni.eniId)?.subnetId, pods.subnetId);
  assert.equal(ds.getEni(eni.eniId)?.subnetCidr, '100.64.0.0/19', 'its own subnet, not the node subnet');
  assert.equal(subnetGateway(ds.getEni(eni.eniId)!.subnetCidr), '100.64.0.1', "its table's gateway");
  const primary = ds.listEnis().find((e) => e.isPrimary)!;
  assert.equal(primary.subnetCidr, '10.0.0.0/24');
  assert.deepEqual(inv.vpcCidrs, ['10.0.0.0/16', '100.64.0.0/16'], 'primary and secondary VPC blocks');

  // A block associated while ipamd runs is there at its next start.
  sim.addVpcCidr('100.65.0.0/16');
  const again = await discover();
  assert.deepEqual(again.inv.vpcCidrs, ['10.0.0.0/16', '100.64.0.0/16', '100.65.0.0/16']);
});

test('an ENI of another subnet that IMDS lists late still gets its subnet CIDR (read again, with retries)', async (t) => {
  const { sim, foreignEni, discover } = await setup(t);
  sim.faults.setImdsLag('attach', 1500);
  const eni = await foreignEni();
  const started = Date.now();
  const { inv, ds } = await discover();
  assert.ok(!inv.imdsEnis.some((e) => e.eniId === eni.eniId), 'IMDS did not list it at discovery');
  assert.equal(ds.getEni(eni.eniId)?.subnetCidr, '100.64.0.0/19');
  assert.ok(Date.now() - started < 15_000);
});

test('an ENI of another subnet whose CIDR IMDS never gives fails discovery with a message naming it (no guessed gateway)', async (t) => {
  const { sim, foreignEni, discover } = await setup(t);
  sim.faults.setImdsLag('attach', 60_000);
  const eni = await foreignEni();
  await assert.rejects(discover({ retries: 1 }), (e: Error) => {
    assert.match(e.message, new RegExp(`IMDS gives no subnet CIDR for ENI ${eni.eniId} \\(MAC ${eni.mac}, subnet-`));
    return true;
  });
});
