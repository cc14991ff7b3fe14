/**
 * Data model of the simulated cloud: subnets, instances and ENIs as EC2 describes them
 * (EC2 API Reference: `Subnet`, `Instance`, `NetworkInterface`). Plain data, no I/O.
 */
import type { SubnetAddresses } from './address-pool.js';
import type { SubnetIpv6Addresses } from './ipv6-pool.js';

/** A VPC subnet. `addresses` tracks which private IPv4s and /28 prefixes are in use. */
export interface Subnet {
  subnetId: string;
  /** IPv4 CIDR, e.g. `10.0.0.0/24`. */
  cidr: string;
  vpcId: string;
  availabilityZone: string;
  addresses: SubnetAddresses;
  /** The subnet's tags (EC2 `tagSet`; CreateTags on a `subnet-` id writes here). */
  tags: Record<string, string>;
  /**
   * The subnet's IPv6 /64 (EC2 `Ipv6CidrBlockAssociationSet`, one association) and its
   * address accounting; absent = an IPv4-only subnet.
   */
  ipv6?: { cidr: string; associationId: string; addresses: SubnetIpv6Addresses };
  /**
   * EC2 `AssignIpv6AddressOnCreation`: an ENI created here (CreateNetworkInterface, or an
   * instance's primary ENI) gets one IPv6 address. Only with {@link ipv6}; absent = false.
   */
  assignIpv6AddressOnCreation?: boolean;
}

/** An ENI attachment (EC2 `NetworkInterfaceAttachment`). */
export interface EniAttachment {
  attachmentId: string;
  instanceId: string;
  deviceIndex: number;
  /** `attaching` | `attached` | `detaching` (a detached attachment is removed). */
  status: 'attaching' | 'attached' | 'detaching';
  deleteOnTermination: boolean;
  /** ms epoch. */
  attachTime: number;
}

/** ENI status as EC2 reports it. */
export type EniStatus = 'available' | 'in-use' | 'attaching' | 'detaching';

/** An elastic network interface (EC2 `NetworkInterface`). */
export interface Eni {
  networkInterfaceId: string;
  subnetId: string;
  vpcId: string;
  availabilityZone: string;
  description: string;
  /** Lower-case, colon separated, e.g. `0a:1b:2c:3d:4e:5f`. */
  macAddress: string;
  /** The ENI's primary private IPv4. */
  primaryIp: string;
  /** Secondary private IPv4s in assignment order. */
  secondaryIps: string[];
  /** Delegated IPv4 prefixes (`a.b.c.d/28`). */
  ipv4Prefixes: string[];
  /** IPv6 addresses from the subnet's /64, in assignment order (compressed form). */
  ipv6Addresses: string[];
  /** Delegated IPv6 prefixes (`<subnet /64>:xxxx::/80`), in assignment order. */
  ipv6Prefixes: string[];
  status: EniStatus;
  attachment?: EniAttachment;
  tags: Record<string, string>;
  securityGroupIds: string[];
  sourceDestCheck: boolean;
  ownerId: string;
  /** ms epoch. */
  createdAt: number;
}

/** A running instance (EC2 `Instance`). */
export interface Instance {
  instanceId: string;
  instanceType: string;
  subnetId: string;
  vpcId: string;
  availabilityZone: string;
  /** Primary private IPv4 of the primary ENI (device 0). */
  privateIpAddress: string;
  primaryEniId: string;
  reservationId: string;
  /** ms epoch. */
  launchTime: number;
}

/** Everything the simulated cloud holds. Maps are keyed by resource id. */
export interface SimState {
  region: string;
  availabilityZone: string;
  vpcId: string;
  /** The VPC's primary IPv4 CIDR block. */
  vpcCidr: string;
  /**
   * Secondary IPv4 CIDR blocks associated with the VPC (AWS VPC User Guide, "Add IPv4 CIDR
   * blocks to a VPC"), in association order; absent = none. Read all blocks with {@link vpcCidrBlocks}.
   */
  secondaryVpcCidrs?: string[];
  /**
   * IPv6 CIDR blocks (/56) associated with the VPC (AWS VPC User Guide, "Add an IPv6 CIDR
   * block to your VPC"), in association order; absent = an IPv4-only VPC.
   */
  vpcIpv6Cidrs?: string[];
  accountId: string;
  subnets: Map<string, Subnet>;
  instances: Map<string, Instance>;
  enis: Map<string, Eni>;
}

/** One EC2 API call as recorded by the simulated cloud. */
export interface ApiCallRecord {
  /** EC2 action name, e.g. `AssignPrivateIpAddresses` (`''` if the request had none). */
  action: string;
  /** The raw form parameters of the request (Action and Version included). */
  params: Record<string, string>;
  /** Arrival time, ms epoch. */
  at: number;
  ok: boolean;
  /** EC2 error code when `ok` is false. */
  errorCode?: string;
  /** The instance the call concerns, when it can be told (InstanceId, or the ENI's attachment). */
  instanceId?: string;
  /** Time to answer in ms, set when the call completes (undefined while in flight; `ok` is false until then). */
  durationMs?: number;
  /** AssignPrivateIpAddresses: the secondary IPs and /28 prefixes EC2 assigned (set when it succeeds). */
  assigned?: string[];
}

/** Every IPv4 CIDR block of the VPC, primary first (IMDS `vpc-ipv4-cidr-blocks` order). */
export function vpcCidrBlocks(state: Pick<SimState, 'vpcCidr' | 'secondaryVpcCidrs'>): string[] {
  return [state.vpcCidr, ...(state.secondaryVpcCidrs ?? [])];
}
