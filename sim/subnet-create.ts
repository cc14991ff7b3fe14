/**
 * A new subnet of the simulated VPC as EC2 CreateSubnet makes it (AWS EC2 API Reference,
 * "CreateSubnet"; AWS VPC User Guide, "Subnet CIDR blocks"): an IPv4 block inside one of
 * the VPC's blocks, a zone of the region, tags, and optionally an IPv6 /64 of the VPC's
 * IPv6 blocks with `AssignIpv6AddressOnCreation`. Pure: checks, then builds; never stores.
 */
import { SubnetAddresses } from './address-pool.js';
import { SubnetIpv6Addresses } from './ipv6-pool.js';
import type { SimState, Subnet } from './types.js';
import { checkAvailabilityZone, checkSubnetCidr } from './vpc.js';
import { ipv6SubnetAssociationId, pickSubnetIpv6Cidr } from './vpc-ipv6.js';

/** Input of `CloudModel.addSubnet`. */
export interface SubnetInput {
  /** IPv4 CIDR, /16–/28. */
  cidr: string;
  /** Zone name; default the region's first zone. */
  availabilityZone?: string;
  tags?: Record<string, string>;
  /** The subnet's IPv6 /64, or `true` for the VPC's lowest free /64; absent = IPv4 only. */
  ipv6Cidr?: string | true;
  /** EC2 `AssignIpv6AddressOnCreation` (needs `ipv6Cidr`). Default false. */
  assignIpv6AddressOnCreation?: boolean;
}

/**
 * Checks `p` against the state and builds the subnet (its id from `nextId`, called once
 * the checks pass).
 * @throws Error when the IPv4 CIDR is not a /16–/28 inside one of the VPC's blocks or
 * overlaps another subnet, the zone is not `<region><letter>`, the IPv6 block is refused
 * (`vpc-ipv6.ts`), or `assignIpv6AddressOnCreation` is asked without an IPv6 block.
 */
export function newSubnet(state: SimState, p: SubnetInput, nextId: () => string): Subnet {
  const cidr = checkSubnetCidr(state, p.cidr);
  const zone = checkAvailabilityZone(state.region, p.availabilityZone ?? state.availabilityZone);
  const ipv6Cidr = p.ipv6Cidr === undefined ? undefined : pickSubnetIpv6Cidr(state, p.ipv6Cidr);
  if (p.assignIpv6AddressOnCreation && !ipv6Cidr)
    throw new Error('assignIpv6AddressOnCreation needs the subnet to have an IPv6 CIDR block');
  const subnetId = nextId();
  return {
    subnetId,
    cidr,
    vpcId: state.vpcId,
    availabilityZone: zone,
    addresses: new SubnetAddresses(cidr),
    tags: { ...p.tags },
    ...(ipv6Cidr
      ? {
          ipv6: {
            cidr: ipv6Cidr,
            associationId: ipv6SubnetAssociationId(subnetId),
            addresses: new SubnetIpv6Addresses(ipv6Cidr),
          },
          assignIpv6AddressOnCreation: p.assignIpv6AddressOnCreation ?? false,
        }
      : {}),
  };
}
