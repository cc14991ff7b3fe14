/**
 * The simulated VPC's data plane (kit/vpc/dataplane.ts) against EC2's state:
 *
 * - contract: random sequences of EC2 calls (the real AWS SDK over HTTP: create, attach,
 *   assign and unassign secondary IPs, /28 prefixes and IPv6 addresses, source/dest check,
 *   detach, delete) on two instances; after each, the VPC namespace's links and routes equal
 *   what EC2's state says (every held address routed to its ENI's link, nothing else);
 * - traffic: an address reaches the instance whose ENI holds it, blackholes while no ENI holds
 *   it (never the old holder), then reaches its new holder; a packet from an address the
 *   sending ENI does not hold is dropped (source/destination check), and passes once EC2 has
 *   the check off for that ENI.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { test } from 'node:test';
import { promisify } from 'node:util';
import {
  AssignIpv6AddressesCommand,
  AssignPrivateIpAddressesCommand,
  AttachNetworkInterfaceCommand,
  CreateNetworkInterfaceCommand,
  DeleteNetworkInterfaceCommand,
  DetachNetworkInterfaceCommand,
  ModifyNetworkInterfaceAttributeCommand,
  UnassignIpv6AddressesCommand,
  UnassignPrivateIpAddressesCommand,
  type EC2Client,
} from '@aws-sdk/client-ec2';
import ipaddr from 'ipaddr.js';
import { buildNode } from '../../kit/node.js';
import { createNamedNetns, type Netns } from '../../kit/netns.js';
import { startVpcDataPlane, type VpcDataPlane } from '../../kit/vpc/dataplane.js';
import { desiredPlane } from '../../kit/vpc/desired.js';
import { waitFor } from '../../kit/wait.js';
import type { SimCloud } from '../../sim/index.js';
import { ec2ClientFor } from '../helpers/sim-fixture.js';

const run = promisify(execFile);

/** mulberry32: a seeded PRNG, so a failing sequence replays with VPC_SEED=<seed>. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A normal form of a route destination (`ip` prints /32 and /128 hosts without a length). */
function norm(dst: string, v6: boolean): string {
  const [a, len] = dst.includes('/') ? dst.split('/') : [dst, v6 ? '128' : '32'];
  return `${ipaddr.parse(a!).toNormalizedString()}/${len}`;
}

/** The VPC namespace's ENI routes: destination → VPC link, both families (link-local and the routers' own left out). */
async function kernelRoutes(dp: VpcDataPlane): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const v6 of [false, true]) {
    const { stdout } = await run('ip', ['-n', dp.netns.name, ...(v6 ? ['-6'] : ['-4']), '-j', 'route', 'show']);
    for (const r of JSON.parse(stdout || '[]') as Array<{ dst: string; dev: string; gateway?: string }>)
      if (r.gateway) out.set(norm(r.dst, v6), r.dev);
  }
  return out;
}

/** What EC2's state asks for, in the same form. */
function stateRoutes(sim: SimCloud, slots: Map<string, number>): Map<string, string> {
  const want = desiredPlane(sim.state, slots);
  const out = new Map<string, string>();
  for (const [m, v6] of [
    [want.routes4, false],
    [want.routes6, true],
  ] as const)
    for (const [dst, eni] of m) out.set(norm(dst, v6), want.links.get(eni)!.vpcName);
  return out;
}

const sorted = (m: Map<string, string>): Array<[string, string]> => [...m].sort(([a], [b]) => a.localeCompare(b));

/** Two instances in one dual-stack subnet, each with a node namespace, and the data plane over both. */
async function twoNodes(t: { after(fn: () => unknown): void }) {
  const k = await buildNode({ ipv6: true, subnetCidr: '10.0.0.0/24', simOptions: { seed: 7 } });
  t.after(() => k.close());
  const second = k.sim.launchInstance({ instanceType: 'm5.large', subnetId: k.subnetId });
  const nodes: Netns[] = [];
  for (const n of ['a', 'b']) {
    const ns = await createNamedNetns(`eni-vpct-${n}-${process.pid}`);
    t.after(() => ns.remove());
    nodes.push(ns);
  }
  const dp = await startVpcDataPlane({ sim: k.sim, name: `eni-vpct-v-${process.pid}` });
  t.after(() => dp.stop());
  await dp.addInstance(k.instanceId, nodes[0]!);
  await dp.addInstance(second.instanceId, nodes[1]!);
  const slots = new Map([
    [k.instanceId, 0],
    [second.instanceId, 1],
  ]);
  return { k, sim: k.sim, dp, nodes, instances: [k.instanceId, second.instanceId], slots, ec2: ec2ClientFor(k.sim) };
}

/** One random EC2 call on the state as it is; EC2's refusals (limits, state) are fine, the point is the state after. */
async function randomCall(
  ec2: EC2Client,
  sim: SimCloud,
  subnetId: string,
  instances: string[],
  r: () => number,
): Promise<string> {
  const pick = <T>(xs: T[]): T | undefined => (xs.length ? xs[Math.floor(r() * xs.length)] : undefined);
  const enis = [...sim.state.enis.values()].filter((e) => e.subnetId === subnetId);
  const free = enis.filter((e) => !e.attachment);
  const attached = enis.filter((e) => e.attachment?.status === 'attached' && e.attachment.deviceIndex > 0);
  const any = pick(enis.filter((e) => e.attachment?.status === 'attached'));
  const kind = Math.floor(r() * 10);
  const call = async (what: string, send: () => Promise<unknown>): Promise<string> => {
    await send().catch((e: Error) => (what += ` (refused: ${e.name})`));
    return what;
  };
  if (kind === 0 || !any)
    return call('create', () => ec2.send(new CreateNetworkInterfaceCommand({ SubnetId: subnetId })));
  if (kind === 1 && free.length) {
    const inst = pick(instances)!;
    const used = new Set(
      [...sim.state.enis.values()]
        .filter((e) => e.attachment?.instanceId === inst)
        .map((e) => e.attachment!.deviceIndex),
    );
    let d = 1;
    while (used.has(d)) d++;
    return call(`attach ${d}`, () =>
      ec2.send(
        new AttachNetworkInterfaceCommand({
          NetworkInterfaceId: free[0]!.networkInterfaceId,
          InstanceId: inst,
          DeviceIndex: d,
        }),
      ),
    );
  }
  const id = any.networkInterfaceId;
  if (kind === 2)
    return call('assign ips', () =>
      ec2.send(
        new AssignPrivateIpAddressesCommand({
          NetworkInterfaceId: id,
          SecondaryPrivateIpAddressCount: 1 + Math.floor(r() * 3),
        }),
      ),
    );
  if (kind === 3)
    return call('assign prefix', () =>
      ec2.send(new AssignPrivateIpAddressesCommand({ NetworkInterfaceId: id, Ipv4PrefixCount: 1 })),
    );
  if (kind === 4 && any.secondaryIps.length)
    return call('unassign ip', () =>
      ec2.send(
        new UnassignPrivateIpAddressesCommand({
          NetworkInterfaceId: id,
          PrivateIpAddresses: [pick(any.secondaryIps)!],
        }),
      ),
    );
  if (kind === 5 && any.ipv4Prefixes.length)
    return call('unassign prefix', () =>
      ec2.send(new UnassignPrivateIpAddressesCommand({ NetworkInterfaceId: id, Ipv4Prefixes: [any.ipv4Prefixes[0]!] })),
    );
  if (kind === 6)
    return call('assign ipv6', () =>
      ec2.send(new AssignIpv6AddressesCommand({ NetworkInterfaceId: id, Ipv6AddressCount: 1 })),
    );
  if (kind === 7 && any.ipv6Addresses.length > 1)
    return call('unassign ipv6', () =>
      ec2.send(
        new UnassignIpv6AddressesCommand({ NetworkInterfaceId: id, Ipv6Addresses: [any.ipv6Addresses.at(-1)!] }),
      ),
    );
  if (kind === 8 && attached.length) {
    const e = pick(attached)!;
    return call('detach', () =>
      ec2.send(new DetachNetworkInterfaceCommand({ AttachmentId: e.attachment!.attachmentId, Force: true })),
    );
  }
  if (kind === 9 && free.length)
    return call('delete', () =>
      ec2.send(new DeleteNetworkInterfaceCommand({ NetworkInterfaceId: free[0]!.networkInterfaceId })),
    );
  return call(`source/dest check ${id}`, () =>
    ec2.send(
      new ModifyNetworkInterfaceAttributeCommand({ NetworkInterfaceId: id, SourceDestCheck: { Value: r() < 0.5 } }),
    ),
  );
}

test('contract: after every EC2 call of a random sequence, the VPC routes equal what EC2 says each ENI holds', async (t) => {
  const seed = Number(process.env['VPC_SEED'] ?? Date.now() % 100_000);
  t.diagnostic(`VPC_SEED=${seed}`);
  const { sim, dp, ec2, instances, slots, k } = await twoNodes(t);
  const r = prng(seed);
  for (let i = 0; i < 60; i++) {
    const what = await randomCall(ec2, sim, k.subnetId, instances, r);
    // Attach and detach finish on EC2's own timer: wait for the kernel to match the state as it then is.
    let last: [string, string][] = [];
    await waitFor(
      `the VPC routes to equal EC2's state after call ${i} (${what})`,
      async () => {
        await dp.sync();
        last = sorted(await kernelRoutes(dp));
        return JSON.stringify(last) === JSON.stringify(sorted(stateRoutes(sim, slots)));
      },
      10_000,
      20,
    ).catch((e: Error) => {
      throw new Error(
        `${e.message}\nkernel: ${JSON.stringify(last)}\nstate:  ${JSON.stringify(sorted(stateRoutes(sim, slots)))}`,
      );
    });
  }
  assert.ok(sim.state.enis.size >= 2);
});
