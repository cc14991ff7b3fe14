/**
 * The simulated cloud's IAM enforcement (sim/iam.ts), over the wire through ipamd's own EC2
 * client (the real AWS SDK) and the SDK directly: under docs/iam/eni-ipam-ipv4.json ipamd
 * creates a tagged ENI (CreateNetworkInterface with TagSpecifications, authorized as
 * CreateTags on the new network interface), but cannot tag an existing ENI or a subnet, nor
 * take an IPv6 prefix; without the tag statement the tagged create is refused naming
 * ec2:CreateTags; the IPv6 policy refuses every ENI lifecycle call; a refusal is HTTP 403
 * `UnauthorizedOperation` naming the action and the resource, and the sim logs it. Policies
 * the sim cannot evaluate are refused when set.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { test, type TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import { CreateTagsCommand, EC2Client } from '@aws-sdk/client-ec2';
import { Ec2Api, Ec2Error } from '../../ipamd/cloud/ec2.js';
import { ensureDummyAwsCredentials } from '../../kit/sim-node.js';
import type { IamPolicy } from '../../sim/iam.js';
import { SimCloud } from '../../sim/index.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const policy = (family: string) =>
  JSON.parse(readFileSync(path.join(ROOT, 'docs', 'iam', `eni-ipam-${family}.json`), 'utf8')) as IamPolicy;

async function world(t: TestContext, iamPolicy: unknown) {
  ensureDummyAwsCredentials();
  const sim = new SimCloud({ seed: 11, vpcIpv6Cidrs: ['2600:1f14:abc:de00::/56'] });
  await sim.start();
  t.after(() => sim.stop());
  const subnetId = sim.addSubnet({ cidr: '10.0.0.0/24', ipv6Cidr: true }).subnetId;
  const inst = sim.launchInstance({ instanceType: 'm5.large', subnetId });
  sim.setIamPolicy(iamPolicy);
  const api = new Ec2Api({ region: 'us-west-2', endpoint: sim.ec2Endpoint, maxAttempts: 1 });
  t.after(() => api.close());
  const sdk = new EC2Client({ region: 'us-west-2', endpoint: sim.ec2Endpoint, maxAttempts: 1 });
  t.after(() => sdk.destroy());
  return { sim, api, sdk, subnetId, inst };
}

const createReq = (subnetId: string) => ({
  subnetId,
  description: 'eni-ipam test',
  tags: { 'node.k8s.amazonaws.com/instance_id': 'i-1' },
  secondaryCount: 2,
});

/** An ipamd EC2 call refused with UnauthorizedOperation naming `action`. */
async function refused(p: Promise<unknown>, action: string): Promise<void> {
  await assert.rejects(p, (e: unknown) => {
    assert.ok(e instanceof Ec2Error, String(e));
    assert.equal(e.code, 'UnauthorizedOperation');
    assert.match(
      e.message,
      new RegExp(`not authorized to perform: ${action}( on resource: arn:aws:ec2:\\S+)? because`),
    );
    return true;
  });
}

test('the IPv4 policy: a tagged ENI can be created and attached; existing ENIs and subnets cannot be tagged; no IPv6 prefix', async (t) => {
  const { sim, api, sdk, subnetId, inst } = await world(t, policy('ipv4'));
  const eni = await api.createEni(createReq(subnetId));
  assert.equal(eni.tags['node.k8s.amazonaws.com/instance_id'], 'i-1', 'tagged on creation');
  const att = await api.attachEni(eni.eniId, inst.instanceId, 1);
  await api.setDeleteOnTermination(eni.eniId, att);
  await assert.rejects(
    sdk.send(new CreateTagsCommand({ Resources: [eni.eniId], Tags: [{ Key: 'k', Value: 'v' }] })),
    (e: { name?: string; $metadata?: { httpStatusCode?: number }; message: string }) => {
      assert.equal(e.name, 'UnauthorizedOperation');
      assert.equal(e.$metadata?.httpStatusCode, 403);
      assert.match(
        e.message,
        new RegExp(`ec2:CreateTags on resource: arn:aws:ec2:us-west-2:123456789012:network-interface/${eni.eniId} `),
      );
      return true;
    },
  );
  await assert.rejects(
    sdk.send(new CreateTagsCommand({ Resources: [subnetId], Tags: [{ Key: 'kubernetes.io/role/cni', Value: '1' }] })),
    /ec2:CreateTags on resource: arn:aws:ec2:us-west-2:123456789012:subnet\//,
  );
  await refused(api.assignIpv6Prefixes(inst.primaryEniId, 1), 'ec2:AssignIpv6Addresses');
  const logged = sim.calls.filter((c) => c.errorCode === 'UnauthorizedOperation').map((c) => c.action);
  assert.deepEqual(logged, ['CreateTags', 'CreateTags', 'AssignIpv6Addresses']);
  assert.equal(sim.state.enis.get(eni.eniId)?.tags.k, undefined, 'a refused call changes nothing');
});

test('without the CreateTags statement, a create that tags is refused naming ec2:CreateTags', async (t) => {
  const p = policy('ipv4');
  const statements = Array.isArray(p.Statement) ? p.Statement : [p.Statement];
  const { sim, api, subnetId } = await world(t, {
    ...p,
    Statement: statements.filter((s) => s.Action !== 'ec2:CreateTags'),
  });
  await refused(api.createEni(createReq(subnetId)), 'ec2:CreateTags');
  assert.equal([...sim.state.enis.values()].length, 1, 'no ENI created: only the primary');
});

test('the IPv6 policy: the /80 and the describes, no ENI lifecycle', async (t) => {
  const { api, subnetId, inst } = await world(t, policy('ipv6'));
  assert.equal((await api.assignIpv6Prefixes(inst.primaryEniId, 1)).length, 1);
  assert.equal((await api.describeEnis([inst.primaryEniId])).length, 1);
  await refused(api.createEni(createReq(subnetId)), 'ec2:CreateNetworkInterface');
  await refused(api.assignIps(inst.primaryEniId, 1), 'ec2:AssignPrivateIpAddresses');
  await refused(api.describeSubnets({ 'subnet-id': [subnetId] }), 'ec2:DescribeSubnets');
});

test('an explicit Deny wins; policies the sim cannot evaluate are refused when set', async (t) => {
  const p = policy('dual');
  const statements = Array.isArray(p.Statement) ? p.Statement : [p.Statement];
  const { sim, api, inst } = await world(t, {
    ...p,
    Statement: [...statements, { Effect: 'Deny', Action: 'ec2:Assign*', Resource: '*' }],
  });
  await assert.rejects(api.assignIps(inst.primaryEniId, 1), /with an explicit deny/);
  assert.throws(
    () =>
      sim.setIamPolicy({
        Version: '2012-10-17',
        Statement: [{ Effect: 'Allow', Action: '*', Resource: '*', Condition: { ArnLike: { 'aws:SourceArn': 'x' } } }],
      }),
    /condition operator ArnLike is not evaluated \(accepted: StringEquals, StringLike\)/,
  );
  assert.throws(() => sim.setIamPolicy({ Statement: [] }), /"Version": "2012-10-17"/);
  assert.throws(
    () => sim.setIamPolicy({ Version: '2012-10-17', Statement: [{ Effect: 'Allow', NotAction: 'x', Resource: '*' }] }),
    /Statement\[0\]: Action must be a string or a non-empty list/,
  );
  sim.setIamPolicy(undefined);
  assert.equal((await api.assignIps(inst.primaryEniId, 1)).length, 1, 'no policy: every call allowed');
});
