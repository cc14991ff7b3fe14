/**
 * JSON snapshot of the simulated cloud's state (served at `GET /_sim/state`): the VPC's
 * CIDR blocks, subnets with zone, tags and free-address counts, instances, and ENIs with their IPs, prefixes, tags,
 * attachment and status.
 */
import { vpcCidrBlocks, type Eni, type Instance, type SimState } from './types.js';

/** Serialisable snapshot of a {@link SimState}. */
export interface SimStateJson {
  region: string;
  availabilityZone: string;
  vpcId: string;
  vpcCidr: string;
  /** Every IPv4 CIDR block of the VPC, primary first. */
  vpcCidrs: string[];
  /** The VPC's IPv6 blocks ([] = IPv4 only). */
  vpcIpv6Cidrs: string[];
  accountId: string;
  subnets: {
    subnetId: string;
    cidr: string;
    vpcId: string;
    availabilityZone: string;
    availableIpAddressCount: number;
    tags: Record<string, string>;
    /** The subnet's IPv6 /64, when it has one. */
    ipv6Cidr?: string;
  }[];
  instances: Instance[];
  enis: Eni[];
}

/** Deep-copies the state into plain JSON-able objects. */
export function stateToJson(s: SimState): SimStateJson {
  return {
    region: s.region,
    availabilityZone: s.availabilityZone,
    vpcId: s.vpcId,
    vpcCidr: s.vpcCidr,
    vpcCidrs: vpcCidrBlocks(s),
    vpcIpv6Cidrs: [...(s.vpcIpv6Cidrs ?? [])],
    accountId: s.accountId,
    subnets: [...s.subnets.values()].map((x) => ({
      subnetId: x.subnetId,
      cidr: x.cidr,
      vpcId: x.vpcId,
      availabilityZone: x.availabilityZone,
      availableIpAddressCount: x.addresses.freeCount(),
      tags: { ...x.tags },
      ...(x.ipv6 ? { ipv6Cidr: x.ipv6.cidr } : {}),
    })),
    instances: [...s.instances.values()].map((i) => ({ ...i })),
    enis: structuredClone([...s.enis.values()]),
  };
}
