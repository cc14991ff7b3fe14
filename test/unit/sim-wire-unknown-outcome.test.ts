/**
 * The simulated cloud's unknown-outcome knobs, through the unmodified `@aws-sdk/client-ec2`:
 * an injected error `when: 'after'` performs the action and then fails the call (the
 * client cannot tell whether it happened), `NoResponse` withholds the answer until the
 * client's timeout, and `describePageSize` + `laterPagesOnly` make a describe fail
 * part-way through its pages. Also over `POST /_sim/faults`.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  AssignPrivateIpAddressesCommand,
  CreateNetworkInterfaceCommand,
  DescribeNetworkInterfacesCommand,
  UnassignPrivateIpAddressesCommand,
} from '@aws-sdk/client-ec2';
import { NO_RESPONSE } from '../../sim/index.js';
import { expectSdkError, simAdmin, startSim } from '../helpers/sim-fixture.js';
import { waitFor } from '../../kit/wait.js';

test("when 'after': the assign takes effect, then the call fails with a 500", async (t) => {
  const { sim, ec2, inst } = await startSim(t);
  sim.faults.injectError({ action: 'AssignPrivateIpAddresses', code: 'InternalError', count: 1, when: 'after' });
  await expectSdkError(
    ec2.send(
      new AssignPrivateIpAddressesCommand({ NetworkInterfaceId: inst.primaryEniId, SecondaryPrivateIpAddressCount: 2 }),
    ),
    { name: 'InternalError', status: 500 },
  );
  const eni = sim.state.enis.get(inst.primaryEniId)!;
  assert.equal(eni.secondaryIps.length, 2, 'EC2 assigned the IPs although the call failed');
  assert.equal(sim.calls.at(-1)!.errorCode, 'InternalError');
  // Default ('before'): nothing happens.
  sim.faults.injectError({ action: 'UnassignPrivateIpAddresses', code: 'ServiceUnavailable', count: 1 });
  await expectSdkError(
    ec2.send(
      new UnassignPrivateIpAddressesCommand({
        NetworkInterfaceId: inst.primaryEniId,
        PrivateIpAddresses: [eni.secondaryIps[0]!],
      }),
    ),
    { name: 'ServiceUnavailable', status: 503 },
  );
  assert.equal(eni.secondaryIps.length, 2, 'a failure before the action changes nothing');
});

test('NoResponse: no answer until the client times out; with when=after the ENI exists anyway', async (t) => {
  const { sim, ec2, subnet } = await startSim(t);
  sim.faults.injectError({ action: 'CreateNetworkInterface', code: NO_RESPONSE, count: 1, when: 'after' });
  const t0 = Date.now();
  await assert.rejects(
    ec2.send(new CreateNetworkInterfaceCommand({ SubnetId: subnet.subnetId }), {
      abortSignal: AbortSignal.timeout(400),
    }),
  );
  assert.ok(Date.now() - t0 >= 380, 'the client waited for its own timeout');
  assert.equal([...sim.state.enis.values()].filter((e) => !e.attachment).length, 1, 'the ENI was created');
  const rec = sim.calls.at(-1)!;
  assert.equal(rec.errorCode, NO_RESPONSE);
  await waitFor('the call closed in the log', () => rec.durationMs !== undefined, 2000, 5).catch(() => undefined);
  assert.ok(rec.durationMs !== undefined, 'the call is closed in the log once the client hung up');
});

test('describePageSize with laterPagesOnly: the first page answers, a later page fails (a partial describe)', async (t) => {
  const { sim, ec2, subnet } = await startSim(t);
  for (let i = 0; i < 3; i++) await ec2.send(new CreateNetworkInterfaceCommand({ SubnetId: subnet.subnetId }));
  const r = await simAdmin(sim, 'POST', '/_sim/faults', {
    describePageSize: 2,
    errors: [{ action: 'DescribeNetworkInterfaces', code: 'InternalError', count: 1, laterPagesOnly: true }],
  });
  assert.equal(r.status, 200);
  const first = await ec2.send(new DescribeNetworkInterfacesCommand({ MaxResults: 1000 }));
  assert.equal(first.NetworkInterfaces?.length, 2, 'capped at 2 although the client asked for 1000');
  assert.ok(first.NextToken);
  await expectSdkError(
    ec2.send(new DescribeNetworkInterfacesCommand({ MaxResults: 1000, NextToken: first.NextToken })),
    { name: 'InternalError', status: 500 },
  );
  const again = await ec2.send(new DescribeNetworkInterfacesCommand({ MaxResults: 1000, NextToken: first.NextToken }));
  assert.equal(again.NetworkInterfaces?.length, 2, 'the error was used up: the later page answers now');
  assert.equal(again.NextToken, undefined);
  assert.equal((await simAdmin(sim, 'POST', '/_sim/faults', { describePageSize: null })).status, 200);
  assert.equal((await ec2.send(new DescribeNetworkInterfacesCommand({}))).NetworkInterfaces?.length, 4);
  assert.equal(
    (await simAdmin(sim, 'POST', '/_sim/faults', { errors: [{ action: 'X', code: 'Y', count: 1, when: 'later' }] }))
      .status,
    400,
  );
});
