/**
 * The simulated cloud's call log, admin endpoints and fault knobs, driven through the
 * unmodified `@aws-sdk/client-ec2` over HTTP on loopback: throttling (token bucket per
 * action class → RequestLimitExceeded, 503), injected errors with AWS statuses, latency,
 * and the attaching/detaching transitions.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  AssignPrivateIpAddressesCommand,
  AttachNetworkInterfaceCommand,
  CreateNetworkInterfaceCommand,
  DeleteNetworkInterfaceCommand,
  DescribeNetworkInterfacesCommand,
  DescribeSubnetsCommand,
  DetachNetworkInterfaceCommand,
} from '@aws-sdk/client-ec2';
import { SimCloud, type ApiCallRecord, type SimStateJson } from '../../sim/index.js';
import { ec2ClientFor, expectSdkError, simAdmin, startSim } from '../helpers/sim-fixture.js';
import { waitFor } from '../../kit/wait.js';

test('call log: every call with raw params, outcome and instance; countCalls/resetCalls; /_sim/calls, /_sim/state, /_sim/reset-calls', async (t) => {
  const { sim, ec2, subnet, inst } = await startSim(t);
  await ec2.send(
    new AssignPrivateIpAddressesCommand({ NetworkInterfaceId: inst.primaryEniId, SecondaryPrivateIpAddressCount: 2 }),
  );
  await ec2.send(
    new DescribeNetworkInterfacesCommand({ Filters: [{ Name: 'attachment.instance-id', Values: [inst.instanceId] }] }),
  );
  await expectSdkError(ec2.send(new DeleteNetworkInterfaceCommand({ NetworkInterfaceId: 'eni-0000000000000dead' })), {
    name: 'InvalidNetworkInterfaceID.NotFound',
    status: 400,
  });
  await ec2.send(
    new CreateNetworkInterfaceCommand({
      SubnetId: subnet.subnetId,
      TagSpecifications: [{ ResourceType: 'network-interface', Tags: [{ Key: 'k', Value: 'v' }] }],
    }),
  );

  assert.equal(sim.countCalls(), 4);
  assert.equal(sim.countCalls('AssignPrivateIpAddresses'), 1);
  assert.equal(sim.countCalls(['AssignPrivateIpAddresses', 'DeleteNetworkInterface']), 2);
  const [assign, describe, del, create] = sim.calls as [ApiCallRecord, ApiCallRecord, ApiCallRecord, ApiCallRecord];
  assert.equal(assign.ok, true);
  assert.equal(assign.instanceId, inst.instanceId);
  assert.equal(assign.params.Action, 'AssignPrivateIpAddresses');
  assert.equal(assign.params.NetworkInterfaceId, inst.primaryEniId);
  assert.equal(assign.params.SecondaryPrivateIpAddressCount, '2');
  assert.ok(Math.abs(assign.at - Date.now()) < 10_000);
  assert.equal(describe.params['Filter.1.Name'], 'attachment.instance-id');
  assert.equal(describe.params['Filter.1.Value.1'], inst.instanceId);
  assert.equal(describe.instanceId, inst.instanceId);
  assert.equal(del.ok, false);
  assert.equal(del.errorCode, 'InvalidNetworkInterfaceID.NotFound');
  assert.equal(create.params['TagSpecification.1.ResourceType'], 'network-interface');
  assert.equal(create.params['TagSpecification.1.Tag.1.Key'], 'k');

  const calls = await simAdmin(sim, 'GET', '/_sim/calls');
  assert.equal(calls.status, 200);
  assert.deepEqual(
    (calls.json as ApiCallRecord[]).map((c) => [c.action, c.ok]),
    [
      ['AssignPrivateIpAddresses', true],
      ['DescribeNetworkInterfaces', true],
      ['DeleteNetworkInterface', false],
      ['CreateNetworkInterface', true],
    ],
  );
  const state = (await simAdmin(sim, 'GET', '/_sim/state')).json as SimStateJson;
  assert.equal(state.enis.length, 2);
  assert.equal(state.subnets[0]!.availableIpAddressCount, 251 - 4);
  assert.deepEqual(state.enis.find((e) => e.networkInterfaceId === inst.primaryEniId)!.secondaryIps, [
    '10.0.0.5',
    '10.0.0.6',
  ]);

  sim.resetCalls();
  assert.equal(sim.countCalls(), 0);
  await ec2.send(new DescribeSubnetsCommand({}));
  assert.equal((await simAdmin(sim, 'POST', '/_sim/reset-calls')).status, 200);
  assert.equal(sim.calls.length, 0, 'the same array is emptied');
  assert.equal((await simAdmin(sim, 'GET', '/_sim/nope')).status, 404);
});

test('throttling: token bucket per action class, shared by all clients, RequestLimitExceeded (503), refills', async (t) => {
  const { sim, ec2, inst } = await startSim(t);
  const other = ec2ClientFor(sim);
  t.after(() => other.destroy());
  sim.faults.setThrottle('describe', { burst: 3, refillPerSecond: 0 });
  await ec2.send(new DescribeSubnetsCommand({}));
  await other.send(new DescribeSubnetsCommand({}));
  await ec2.send(new DescribeNetworkInterfacesCommand({}));
  await expectSdkError(other.send(new DescribeSubnetsCommand({})), { name: 'RequestLimitExceeded', status: 503 });
  await expectSdkError(ec2.send(new DescribeNetworkInterfacesCommand({})), {
    name: 'RequestLimitExceeded',
    status: 503,
  });
  // the mutating class has its own (here unlimited) bucket
  await ec2.send(
    new AssignPrivateIpAddressesCommand({ NetworkInterfaceId: inst.primaryEniId, SecondaryPrivateIpAddressCount: 1 }),
  );
  const throttled = sim.calls.filter((c) => c.errorCode === 'RequestLimitExceeded');
  assert.equal(throttled.length, 2, 'throttled calls are recorded');
  assert.equal(sim.countCalls(), 6);

  // over HTTP: a refilling bucket for the mutating class
  const r = await simAdmin(sim, 'POST', '/_sim/faults', {
    throttle: { mutating: { burst: 1, refillPerSecond: 1 }, describe: null },
  });
  assert.equal(r.status, 200);
  await ec2.send(new DescribeSubnetsCommand({}));
  await ec2.send(
    new AssignPrivateIpAddressesCommand({ NetworkInterfaceId: inst.primaryEniId, SecondaryPrivateIpAddressCount: 1 }),
  );
  await expectSdkError(
    ec2.send(
      new AssignPrivateIpAddressesCommand({ NetworkInterfaceId: inst.primaryEniId, SecondaryPrivateIpAddressCount: 1 }),
    ),
    { name: 'RequestLimitExceeded', status: 503 },
  );
  // The bucket refills one token a second (slow enough that a loaded machine cannot refill it
  // between the two sends above): the next Assign succeeds once it has.
  await waitFor(
    'the mutating bucket to refill one token',
    () =>
      ec2
        .send(
          new AssignPrivateIpAddressesCommand({
            NetworkInterfaceId: inst.primaryEniId,
            SecondaryPrivateIpAddressCount: 1,
          }),
        )
        .then(
          () => true,
          () => undefined,
        ),
    10_000,
    250,
  );
});

test('injected errors fail the next N calls of an action with that code and the AWS status, then stop', async (t) => {
  const { sim, ec2, subnet, inst } = await startSim(t);
  const assign = (): Promise<unknown> =>
    ec2.send(
      new AssignPrivateIpAddressesCommand({ NetworkInterfaceId: inst.primaryEniId, SecondaryPrivateIpAddressCount: 1 }),
    );
  sim.faults.injectError({ action: 'AssignPrivateIpAddresses', code: 'InsufficientFreeAddressesInSubnet', count: 2 });
  await expectSdkError(assign(), { name: 'InsufficientFreeAddressesInSubnet', status: 400 });
  await ec2.send(new DescribeSubnetsCommand({})); // other actions are unaffected
  await expectSdkError(assign(), { name: 'InsufficientFreeAddressesInSubnet', status: 400 });
  await assign();
  assert.equal(sim.state.enis.get(inst.primaryEniId)!.secondaryIps.length, 1, 'failed calls changed nothing');

  const r = await simAdmin(sim, 'POST', '/_sim/faults', {
    errors: [
      { action: 'AttachNetworkInterface', code: 'AttachmentLimitExceeded', count: 1 },
      { action: 'DescribeNetworkInterfaces', code: 'InvalidNetworkInterfaceID.NotFound', count: 1 },
      { action: 'CreateNetworkInterface', code: 'InternalError', count: 1 },
      { action: 'CreateNetworkInterface', code: 'Unavailable', count: 1 },
    ],
  });
  assert.equal(r.status, 200);
  await expectSdkError(ec2.send(new DescribeNetworkInterfacesCommand({})), {
    name: 'InvalidNetworkInterfaceID.NotFound',
    status: 400,
  });
  await expectSdkError(ec2.send(new CreateNetworkInterfaceCommand({ SubnetId: subnet.subnetId })), {
    name: 'InternalError',
    status: 500,
  });
  await expectSdkError(ec2.send(new CreateNetworkInterfaceCommand({ SubnetId: subnet.subnetId })), {
    name: 'Unavailable',
    status: 503,
  });
  const eni = (await ec2.send(new CreateNetworkInterfaceCommand({ SubnetId: subnet.subnetId }))).NetworkInterface!;
  await expectSdkError(
    ec2.send(
      new AttachNetworkInterfaceCommand({
        NetworkInterfaceId: eni.NetworkInterfaceId!,
        InstanceId: inst.instanceId,
        DeviceIndex: 1,
      }),
    ),
    { name: 'AttachmentLimitExceeded', status: 400 },
  );
  await ec2.send(
    new AttachNetworkInterfaceCommand({
      NetworkInterfaceId: eni.NetworkInterfaceId!,
      InstanceId: inst.instanceId,
      DeviceIndex: 1,
    }),
  );
  assert.equal(sim.faults.pendingInjectedErrors(), 0);
  assert.deepEqual(
    sim.calls.filter((c) => !c.ok).map((c) => c.errorCode),
    [
      'InsufficientFreeAddressesInSubnet',
      'InsufficientFreeAddressesInSubnet',
      'InvalidNetworkInterfaceID.NotFound',
      'InternalError',
      'Unavailable',
      'AttachmentLimitExceeded',
    ],
  );
});

test('latency knob: fixed per action, {min,max}, and "*" for all', async (t) => {
  const { sim, ec2 } = await startSim(t);
  const timed = async (f: () => Promise<unknown>): Promise<number> => {
    const t0 = performance.now();
    await f();
    return performance.now() - t0;
  };
  const served = (): number => sim.calls.at(-1)!.durationMs!; // server-side time, immune to client scheduling noise
  sim.faults.setLatency('DescribeSubnets', 200);
  assert.ok((await timed(() => ec2.send(new DescribeSubnetsCommand({})))) >= 190);
  assert.ok(served() >= 195);
  await ec2.send(new DescribeNetworkInterfacesCommand({}));
  assert.ok(served() < 100, 'other actions are not delayed');
  await simAdmin(sim, 'POST', '/_sim/faults', { latency: { DescribeSubnets: null, '*': { min: 100, max: 150 } } });
  const d = await timed(() => ec2.send(new DescribeNetworkInterfacesCommand({})));
  assert.ok(d >= 95, `range latency ${d}`);
  assert.ok(served() >= 95 && served() < 250, `served in ${served()} ms`);
  await simAdmin(sim, 'POST', '/_sim/faults', { reset: true });
  await ec2.send(new DescribeSubnetsCommand({}));
  assert.ok(served() < 100, 'reset clears latency');
});

test('attachment transitions: attaching → attached/in-use and detaching → available after the configured delays', async (t) => {
  const { sim, ec2, subnet, inst } = await startSim(t);
  await simAdmin(sim, 'POST', '/_sim/faults', { attachmentDelays: { attachMs: 300, detachMs: 300 } });
  const id = (await ec2.send(new CreateNetworkInterfaceCommand({ SubnetId: subnet.subnetId }))).NetworkInterface!
    .NetworkInterfaceId!;
  const att = await ec2.send(
    new AttachNetworkInterfaceCommand({ NetworkInterfaceId: id, InstanceId: inst.instanceId, DeviceIndex: 1 }),
  );
  const describe = async () =>
    (await ec2.send(new DescribeNetworkInterfacesCommand({ NetworkInterfaceIds: [id] }))).NetworkInterfaces![0]!;
  let d = await describe();
  assert.equal(d.Status, 'attaching');
  assert.equal(d.Attachment?.Status, 'attaching');
  await waitFor('attached', async () => (await describe()).Attachment?.Status === 'attached', 3000, 50);
  assert.equal((await describe()).Status, 'in-use');

  await ec2.send(new DetachNetworkInterfaceCommand({ AttachmentId: att.AttachmentId! }));
  d = await describe();
  assert.equal(d.Status, 'detaching');
  assert.equal(d.Attachment?.Status, 'detaching');
  await expectSdkError(ec2.send(new DeleteNetworkInterfaceCommand({ NetworkInterfaceId: id })), {
    name: 'InvalidParameterValue',
    status: 400,
  });
  await waitFor('available', async () => (await describe()).Status === 'available', 3000, 50);
  assert.equal((await describe()).Attachment, undefined);
  await ec2.send(new DeleteNetworkInterfaceCommand({ NetworkInterfaceId: id }));
});

test('POST /_sim/faults rejects a malformed body with 400 and changes nothing', async (t) => {
  const { sim } = await startSim(t);
  const bad = await simAdmin(sim, 'POST', '/_sim/faults', {
    throttle: { describe: { burst: -1, refillPerSecond: 1 } },
  });
  assert.equal(bad.status, 400);
  assert.match((bad.json as { error: string }).error, /throttle\.describe\.burst/);
  assert.equal((await simAdmin(sim, 'POST', '/_sim/faults', { nosuchknob: 1 })).status, 400);
  const snap = (await simAdmin(sim, 'GET', '/_sim/faults')).json as { throttle: object };
  assert.deepEqual(snap.throttle, {});
});

test('stop() clears pending transition timers and sleeps, and frees both ports', async () => {
  const sim = new SimCloud();
  await sim.start();
  const subnet = sim.addSubnet({ cidr: '10.0.0.0/24' });
  const inst = sim.launchInstance({ instanceType: 'm5.large', subnetId: subnet.subnetId });
  const ec2 = ec2ClientFor(sim);
  try {
    sim.faults.setAttachmentDelays({ attachMs: 60_000 });
    const id = (await ec2.send(new CreateNetworkInterfaceCommand({ SubnetId: subnet.subnetId }))).NetworkInterface!
      .NetworkInterfaceId!;
    await ec2.send(
      new AttachNetworkInterfaceCommand({ NetworkInterfaceId: id, InstanceId: inst.instanceId, DeviceIndex: 1 }),
    );
    sim.faults.setLatency('DescribeSubnets', 60_000);
    void ec2.send(new DescribeSubnetsCommand({})).catch(() => undefined); // dropped by stop()
    await waitFor('the slow call to arrive', () => sim.countCalls('DescribeSubnets') === 1, 3000, 10);
  } finally {
    ec2.destroy();
    await sim.stop();
  }
  // a pending 60 s timer would keep the test process alive; node:test reports that as a hang
  const res = await fetch(sim.ec2Endpoint).then(
    () => 'open',
    () => 'closed',
  );
  assert.equal(res, 'closed');
});
