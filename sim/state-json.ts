/**
 * JSON snapshot of the simulated cloud's state (served at `GET /_sim/state`): subnets
 * with free-address counts, instances, and ENIs with their IPs, prefixes, tags,
 * attachment and status.
 */
import type { Eni, Instance, SimState } from './types.js';

/** Serialisable snapshot of a {@link SimState}. */
export interface SimStateJson {
  region: string;
  availabilityZone: string;
  vpcId: string;
  vpcCidr: string;
  accountId: string;
  subnets: {
    subnetId: string;
    cidr: string;
    vpcId: string;
    availabilityZone: string;
    availableIpAddressCount: number;
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
    accountId: s.accountId,
    subnets: [...s.subnets.values()].map((x) => ({
      subnetId: x.subnetId,
      cidr: x.cidr,
      vpcId: x.vpcId,
      availabilityZone: x.availabilityZone,
      availableIpAddressCount: x.addresses.freeCount(),
    })),
    instances: [...s.instances.values()].map((i) => ({ ...i })),
    enis: structuredClone([...s.enis.values()]),
  };
}
