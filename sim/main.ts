#!/usr/bin/env node
/**
 * `eni-ipam-sim`: runs the simulated cloud as a process. Flags (node:util parseArgs):
 * `--instance-type m5.large --subnet-cidr 10.0.0.0/24 --vpc-cidr 10.0.0.0/16[,100.64.0.0/16]
 *  --subnet CIDR[:ZONE[:KEY=VALUE,...]] (repeatable) --vpc-ipv6-cidr 2600:1f14:abc:de00::/56
 *  --ec2-port N --imds-port N --host 127.0.0.1 --region us-west-2 --seed N`.
 * `--vpc-ipv6-cidr` associates that IPv6 /56 with the VPC and makes the node's subnet
 * dual-stack (the lowest free /64 of it), as ipamd's IPv6 mode needs.
 * `--vpc-cidr` lists the VPC's primary block then its secondary blocks; each `--subnet`
 * adds one more subnet (in another zone, tagged: sim/subnet-spec.ts) besides the node's
 * `--subnet-cidr`. Starts, launches one instance in the node's subnet, prints one JSON line
 * `{"ec2Endpoint","imdsEndpoint","instanceId","subnetId","vpcId","subnets"}` on stdout
 * (`subnets`: every subnet as `{subnetId, cidr, availabilityZone, tags}`), and runs until
 * SIGTERM/SIGINT (then closes and exits 0). Bad flags: one error line on stderr, exit 2.
 */
import { parseArgs } from 'node:util';
import { parseIpv4Cidr } from './address-pool.js';
import { instanceTypeInfo, INSTANCE_TYPES } from './instance-types.js';
import { SimCloud } from './sim-cloud.js';
import { parseSubnetSpec, parseVpcCidrs, type SubnetSpec } from './subnet-spec.js';

interface Flags {
  instanceType: string;
  subnetCidr: string;
  vpcCidr: string;
  secondaryVpcCidrs: string[];
  subnets: SubnetSpec[];
  /** `--vpc-ipv6-cidr`: the VPC's IPv6 /56; the node's subnet then gets a /64 of it. */
  vpcIpv6Cidr?: string;
  ec2Port: number;
  imdsPort: number;
  host: string;
  region: string;
  seed?: number;
}

function usageError(msg: string): never {
  process.stderr.write(`eni-ipam-sim: ${msg}\n`);
  process.exit(2);
}

function port(name: string, v: string | undefined): number {
  if (v === undefined) return 0;
  if (!/^\d+$/.test(v) || Number(v) > 65535) usageError(`--${name} must be a port number 0-65535, got '${v}'`);
  return Number(v);
}

function cidr(name: string, v: string): string {
  try {
    return parseIpv4Cidr(v).cidr;
  } catch {
    return usageError(`--${name} must be an IPv4 CIDR such as 10.0.0.0/24, got '${v}'`);
  }
}

/** Parses argv into flags. Exits 2 with one line on any bad flag. */
export function parseFlags(argv: string[]): Flags {
  let parsed: { values: Partial<Record<string, string | string[]>> };
  try {
    parsed = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        'instance-type': { type: 'string' },
        'subnet-cidr': { type: 'string' },
        'vpc-cidr': { type: 'string' },
        subnet: { type: 'string', multiple: true },
        'vpc-ipv6-cidr': { type: 'string' },
        'ec2-port': { type: 'string' },
        'imds-port': { type: 'string' },
        host: { type: 'string' },
        region: { type: 'string' },
        seed: { type: 'string' },
      },
    });
  } catch (e) {
    return usageError((e as Error).message.split('\n')[0]!);
  }
  const { subnet: subnetValues, ...single } = parsed.values;
  const values = single as Partial<Record<string, string>>; // every other option is a single string
  const subnetFlags = Array.isArray(subnetValues) ? subnetValues : [];
  const instanceType = values['instance-type'] ?? 'm5.large';
  if (!instanceTypeInfo(instanceType))
    usageError(`--instance-type '${instanceType}' is unknown; known: ${[...INSTANCE_TYPES.keys()].join(', ')}`);
  const seed = values.seed;
  const v6 = values['vpc-ipv6-cidr'];
  if (v6 !== undefined && !/^[0-9a-fA-F:]+\/56$/.test(v6))
    usageError(`--vpc-ipv6-cidr must be an IPv6 /56 such as 2600:1f14:abc:de00::/56, got '${v6}'`);
  if (seed !== undefined && !/^\d+$/.test(seed)) usageError(`--seed must be a non-negative integer, got '${seed}'`);
  let vpc: ReturnType<typeof parseVpcCidrs>;
  let subnets: SubnetSpec[];
  try {
    vpc = parseVpcCidrs(values['vpc-cidr'] ?? '10.0.0.0/16');
    subnets = subnetFlags.map(parseSubnetSpec);
  } catch (e) {
    return usageError((e as Error).message);
  }
  return {
    instanceType,
    subnetCidr: cidr('subnet-cidr', values['subnet-cidr'] ?? '10.0.0.0/24'),
    vpcCidr: vpc.primary,
    secondaryVpcCidrs: vpc.secondary,
    subnets,
    ...(v6 !== undefined ? { vpcIpv6Cidr: v6 } : {}),
    ec2Port: port('ec2-port', values['ec2-port']),
    imdsPort: port('imds-port', values['imds-port']),
    host: values.host ?? '127.0.0.1',
    region: values.region ?? 'us-west-2',
    ...(seed !== undefined ? { seed: Number(seed) } : {}),
  };
}

async function main(): Promise<void> {
  const f = parseFlags(process.argv.slice(2));
  const sim = new SimCloud({
    region: f.region,
    vpcCidr: f.vpcCidr,
    host: f.host,
    ec2Port: f.ec2Port,
    imdsPort: f.imdsPort,
    ...(f.seed !== undefined ? { seed: f.seed } : {}),
  });
  let subnetId: string;
  let instanceId: string;
  try {
    for (const c of f.secondaryVpcCidrs) sim.addVpcCidr(c);
    if (f.vpcIpv6Cidr !== undefined) sim.addVpcIpv6Cidr(f.vpcIpv6Cidr);
    const subnet = sim.addSubnet({ cidr: f.subnetCidr, ...(f.vpcIpv6Cidr !== undefined ? { ipv6Cidr: true } : {}) });
    for (const s of f.subnets) sim.addSubnet(s);
    subnetId = subnet.subnetId;
    instanceId = sim.launchInstance({ instanceType: f.instanceType, subnetId }).instanceId;
  } catch (e) {
    return usageError((e as Error).message);
  }
  try {
    await sim.start();
  } catch (e) {
    process.stderr.write(`eni-ipam-sim: cannot listen: ${(e as Error).message}\n`);
    process.exit(1);
  }
  process.stdout.write(
    `${JSON.stringify({
      ec2Endpoint: sim.ec2Endpoint,
      imdsEndpoint: sim.imdsEndpoint,
      instanceId,
      subnetId,
      vpcId: sim.state.vpcId,
      subnets: [...sim.state.subnets.values()].map((s) => ({
        subnetId: s.subnetId,
        cidr: s.cidr,
        availabilityZone: s.availabilityZone,
        tags: s.tags,
      })),
    })}\n`,
  );
  const shutdown = (): void => {
    sim.stop().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGTERM', shutdown);
  process.once('SIGINT', shutdown);
}

void main();
