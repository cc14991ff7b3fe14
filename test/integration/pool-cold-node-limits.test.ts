/**
 * A refill that cannot succeed fails the waiting ADDs at once, with a message naming the
 * limit that binds (docs/design.md#10-the-warm-pool-at-depth item 2): MAX_ENI, the instance type's ENI limit (with each
 * ENI full at its IPv4 addresses per ENI), a full subnet, EC2 refusing the attach.
 * ipamd is the real binary over real gRPC, EC2 the simulated cloud through the real SDK.
 * ADDs may wait 30 s here: a failure that says "after waiting" would be a timeout, not
 * the immediate, explained failure required.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as grpc from '@grpc/grpc-js';
import { createNode, type NodeHarness } from '../../kit/node-harness.js';
import { ipamdClient, type GrpcError, type TestIpamdClient } from '../../kit/ipamd-client.js';
import { waitFor } from '../../kit/wait.js';

const WAIT = { ENI_IPAM_ADD_WAIT_TIMEOUT: '30s', ENI_IPAM_INSTALL_CNI: 'false' };

async function started(
  t: { after(fn: () => Promise<void> | void): void },
  p: Parameters<typeof createNode>[0],
): Promise<{ h: NodeHarness; c: TestIpamdClient }> {
  const h = await createNode({ ...p, ipamdEnv: { ...WAIT, ...p?.ipamdEnv } });
  t.after(() => h.close());
  await h.startIpamd();
  const c = ipamdClient(h.socket);
  t.after(() => c.close());
  return { h, c };
}

/** ADDs `n` pods concurrently; all must succeed with unique IPs. */
async function fill(c: TestIpamdClient, n: number): Promise<void> {
  const ips = await Promise.all(Array.from({ length: n }, (_, i) => c.add(`fill${i}`).then((r) => r.ipv4_addr)));
  assert.equal(new Set(ips).size, n);
}

/** The next ADD fails with RESOURCE_EXHAUSTED, at once (well before its 30 s wait), and its message matches. */
async function failsBecause(c: TestIpamdClient, want: RegExp): Promise<void> {
  const t0 = Date.now();
  await assert.rejects(c.add('one-too-many'), (e: GrpcError) => {
    assert.equal(e.code, grpc.status.RESOURCE_EXHAUSTED);
    assert.match(e.details, /^no free IP and the pool cannot grow: /);
    assert.match(e.details, want);
    return true;
  });
  assert.ok(Date.now() - t0 < 20_000, `failed after ${Date.now() - t0} ms, not at once`);
}

test('MAX_ENI below the instance limit: the waiter fails naming MAX_ENI', async (t) => {
  const { c } = await started(t, { instanceType: 'm5.large', ipamdEnv: { MAX_ENI: '2' } });
  await fill(c, 18);
  await failsBecause(
    c,
    /MAX_ENI=2 reached \(instance type m5\.large allows 3 ENIs\) and every ENI holds its 9 secondary IPs \(Ipv4AddressesPerInterface 10/,
  );
});

test('the instance type ENI limit: the waiter fails naming the type, its ENI limit and its IPs per ENI', async (t) => {
  const { c } = await started(t, { instanceType: 't3.medium' });
  await fill(c, 15);
  await failsBecause(
    c,
    /instance type t3\.medium is at its ENI limit \(3 ENIs\) and every ENI holds its 5 secondary IPs \(Ipv4AddressesPerInterface 6/,
  );
});

test('a full subnet: the waiter fails naming the subnet and the EC2 error', async (t) => {
  // /28: 11 addresses; the instance takes 1, the primary ENI fills with 9, 1 is left: no room for another ENI.
  const { h, c } = await started(t, { subnetCidr: '10.0.0.0/28' });
  await fill(c, 9);
  await failsBecause(
    c,
    new RegExp(`the subnet has no free addresses \\(EC2 InsufficientFreeAddressesInSubnet for ${h.subnetId}\\)`),
  );
});

test('EC2 refusing the attach (AttachmentLimitExceeded): the waiter fails saying so, and the unattached ENI is deleted', async (t) => {
  const { h, c } = await started(t, {});
  await waitFor('the primary ENI filled', async () => (await h.ipamd!.status()).counts.available === 9);
  h.sim.faults.injectError({ action: 'AttachNetworkInterface', code: 'AttachmentLimitExceeded', count: 10 });
  await fill(c, 9);
  await waitFor('the refused attach', () => h.sim.countCalls('AttachNetworkInterface') >= 1);
  await failsBecause(
    c,
    /EC2 refused to attach another ENI \(AttachmentLimitExceeded\): the instance is at its ENI limit/,
  );
  await waitFor('the new ENI deleted again', () => [...h.sim.state.enis.values()].every((e) => e.attachment), 10_000);
});
