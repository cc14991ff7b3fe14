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

/** A node program in `ns` (its stdout collected in `out`); @returns the process, once it printed `up`. */
async function inNs(t: { after(fn: () => unknown): void }, ns: Netns, js: string) {
  const { spawn } = await import('node:child_process');
  const p = spawn('nsenter', [`--net=${ns.path}`, process.execPath, '-e', js], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  t.after(() => p.kill('SIGKILL'));
  const box = { out: '' };
  p.stdout.on('data', (d: Buffer) => (box.out += d.toString()));
  await waitFor('a helper process up', () => box.out.includes('up'), 10_000);
  return box;
}

/** From `ns`, connects to `host`:`port`: the first line answered, or '' after 2 s. */
async function ask(ns: Netns, host: string, port: number): Promise<string> {
  const js = `const s=require('net').connect({host:${JSON.stringify(host)},port:${port}});let d='';s.on('data',b=>d+=b);s.on('end',()=>{console.log(d.trim());process.exit(0)});s.on('error',()=>process.exit(0));setTimeout(()=>process.exit(0),2000)`;
  const { stdout } = await run('nsenter', [`--net=${ns.path}`, process.execPath, '-e', js]);
  return stdout.trim();
}

test('traffic: an address reaches the ENI holding it, blackholes while none does; a source the ENI does not hold is dropped', async (t) => {
  const { sim, dp, nodes, instances, ec2 } = await twoNodes(t);
  const [a, b] = nodes as [Netns, Netns];
  const vpc = dp.netns;
  const eniOf = (inst: string) => [...sim.state.enis.values()].find((e) => e.attachment?.instanceId === inst)!;
  const [ea, eb] = [eniOf(instances[0]!), eniOf(instances[1]!)];
  for (const [ns, e] of [
    [a, ea],
    [b, eb],
  ] as const) {
    await run('ip', ['-n', ns.name, 'addr', 'add', `${e.primaryIp}/32`, 'dev', 'eth0']);
    await run('ip', ['-n', ns.name, 'link', 'set', 'eth0', 'up']);
    await run('ip', ['-n', ns.name, 'route', 'add', 'default', 'via', '10.0.0.1', 'dev', 'eth0', 'onlink']);
    await run('ip', ['-n', ns.name, 'addr', 'add', '10.0.0.77/32', 'dev', 'lo']); // both have it; EC2 says who holds it
  }
  const client = '10.0.255.246';
  await run('ip', ['-n', vpc.name, 'addr', 'add', `${client}/32`, 'dev', 'lo']);
  const serve = (label: string) =>
    `require('net').createServer(s=>s.end('${label}\\n')).listen(7000,'10.0.0.77',()=>console.log('up'))`;
  await inNs(t, a, serve('A'));
  await inNs(t, b, serve('B'));
  const heard = await inNs(
    t,
    vpc,
    `const u=require('dgram').createSocket('udp4');u.on('message',(m,r)=>console.log('from '+r.address));u.bind(7001,'${client}',()=>console.log('up'))`,
  );
  const send = (ns: Netns, from: string) =>
    run('nsenter', [
      `--net=${ns.path}`,
      process.execPath,
      '-e',
      `const u=require('dgram').createSocket('udp4');u.bind(0,'${from}',()=>u.send('x',7001,'${client}',()=>u.close()))`,
    ]);

  await ec2.send(
    new AssignPrivateIpAddressesCommand({
      NetworkInterfaceId: ea.networkInterfaceId,
      PrivateIpAddresses: ['10.0.0.77'],
    }),
  );
  await dp.sync();
  assert.equal(await ask(vpc, '10.0.0.77', 7000), 'A', 'the VPC delivers to the ENI that holds the address');
  await ec2.send(
    new UnassignPrivateIpAddressesCommand({
      NetworkInterfaceId: ea.networkInterfaceId,
      PrivateIpAddresses: ['10.0.0.77'],
    }),
  );
  await dp.sync();
  assert.equal(await ask(vpc, '10.0.0.77', 7000), '', 'unassigned: it blackholes, though A still has it configured');
  await ec2.send(
    new AssignPrivateIpAddressesCommand({
      NetworkInterfaceId: eb.networkInterfaceId,
      PrivateIpAddresses: ['10.0.0.77'],
    }),
  );
  await dp.sync();
  for (let i = 0; i < 3; i++) assert.equal(await ask(vpc, '10.0.0.77', 7000), 'B', 'assigned to B: B answers, never A');

  // Source/destination check: A sends from 10.0.0.77 (B's now) and from its own address.
  await send(a, '10.0.0.77');
  await send(a, ea.primaryIp);
  await waitFor("A's own address heard", () => heard.out.includes(`from ${ea.primaryIp}`), 5_000);
  assert.ok(!heard.out.includes('from 10.0.0.77'), `a source A's ENI does not hold is dropped: ${heard.out}`);
  await ec2.send(
    new ModifyNetworkInterfaceAttributeCommand({
      NetworkInterfaceId: ea.networkInterfaceId,
      SourceDestCheck: { Value: false },
    }),
  );
  await dp.sync();
  await send(a, '10.0.0.77');
  await waitFor(
    'the same source heard once EC2 has the check off for that ENI',
    () => heard.out.includes('from 10.0.0.77'),
    5_000,
  );
});
