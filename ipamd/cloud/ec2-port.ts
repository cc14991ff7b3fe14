/**
 * The EC2 port: the fifteen EC2 operations the controller (grow, shrink, ENI create/free,
 * the ENI reconcile, the leaked-ENI sweep) and its start-up use, as one narrow interface,
 * in ipamd's own shapes ({@link Ec2Eni}, {@link Ec2Error}), with no SDK type in sight.
 *
 * Two implementations:
 * - `Ec2Api` (ec2.ts): the AWS SDK over HTTP, with the node's EC2 budget, retries and
 *   per-attempt timeouts — what ipamd runs with;
 * - `MemoryEc2` (sim/memory-ec2.ts): the simulator's EC2 state model called in-process,
 *   with scripted faults and virtual time — for the executors' unit tests and benches.
 *
 * Contract every implementation keeps (what the executors rely on):
 * - every method throws {@link Ec2Error} only, with the EC2 error code;
 * - `attempts` and `kind` on the error say whether the request may have been executed
 *   (see `failedForSure` in ec2-outcome.ts): `client`/`throttle`
 *   on the first attempt = not executed; `server`/`transport`, or any failure after a
 *   retry = unknown outcome;
 * - `describeEnis` with an unknown id fails the whole call with
 *   `InvalidNetworkInterfaceID.NotFound` (as EC2 does); `deleteEni` treats that code as
 *   success; `describeEnisByFilters` returns every page or throws (never a partial list).
 */
import type { Ec2FailureKind } from './retry.js';

/** An EC2 API error with its code (e.g. `InvalidNetworkInterfaceID.NotFound`). */
export class Ec2Error extends Error {
  /** Attempts made before giving up (1 when not retried). */
  attempts = 1;
  /** Kind of the last failure, when it came from EC2 or the network. */
  kind?: Ec2FailureKind;

  constructor(
    readonly action: string,
    readonly code: string,
    message: string,
    readonly httpStatus?: number,
  ) {
    super(`${action}: ${code}: ${message}`);
    this.name = 'Ec2Error';
  }
}

/** An ENI as EC2 describes it. */
export interface Ec2Eni {
  eniId: string;
  mac: string;
  status: string;
  subnetId: string;
  vpcId: string;
  description: string;
  primaryIp: string;
  /** Secondary private IPv4s (the primary excluded). */
  secondaryIps: string[];
  ipv4Prefixes: string[];
  /** IPv6 addresses (EC2 `Ipv6Addresses`); absent = none. */
  ipv6Addresses?: string[];
  /** Delegated IPv6 /80 prefixes (EC2 `Ipv6Prefixes`); absent = none. */
  ipv6Prefixes?: string[];
  attachment?: {
    attachmentId: string;
    instanceId: string;
    deviceIndex: number;
    status: string;
    deleteOnTermination: boolean;
  };
  tags: Record<string, string>;
  securityGroupIds: string[];
}

/** A subnet as DescribeSubnets shows it (EC2 API Reference: `Subnet`). */
export interface Ec2Subnet {
  subnetId: string;
  /** IPv4 CIDR block, e.g. `10.0.1.0/24`. */
  cidr: string;
  /** `AvailableIpAddressCount`: free IPv4 addresses now (addresses, not /28 blocks). */
  availableIps: number;
  vpcId: string;
  availabilityZone: string;
  /** Tags by key (e.g. `kubernetes.io/role/cni` → `1`). */
  tags: Record<string, string>;
  /** The subnet's associated IPv6 blocks (`Ipv6CidrBlockAssociationSet`, a /64); absent = IPv4 only. */
  ipv6Cidrs?: string[];
}

/** Input of {@link Ec2Port.createEni}. */
export interface CreateEniRequest {
  subnetId: string;
  description: string;
  tags: Record<string, string>;
  /** Secondary private IPv4s to assign at creation (0 with prefix delegation). */
  secondaryCount: number;
  /** /28 IPv4 prefixes to assign at creation (prefix delegation; EC2 refuses both in one request). */
  prefixCount?: number;
  securityGroupIds?: string[];
}

/** The EC2 operations the controller uses. Every method throws {@link Ec2Error} only. */
export interface Ec2Port {
  /** DescribeNetworkInterfaces by id; [] for no ids. @throws Ec2Error `InvalidNetworkInterfaceID.NotFound` when any id is unknown. */
  describeEnis(eniIds: string[]): Promise<Ec2Eni[]>;
  /** DescribeNetworkInterfaces with filters (EC2 filter names → values), every page. */
  describeEnisByFilters(filters: Record<string, string[]>): Promise<Ec2Eni[]>;
  /** DescribeSubnets for one subnet: its IPv4 CIDR, free addresses and VPC. */
  describeSubnet(subnetId: string): Promise<{ cidr: string; availableIps: number; vpcId: string }>;
  /**
   * DescribeSubnets with filters (EC2 filter names → values, e.g. `vpc-id`,
   * `availability-zone`, `tag:<key>`, `tag-key`, `subnet-id`), every page; never a partial list.
   */
  describeSubnets(filters: Record<string, string[]>): Promise<Ec2Subnet[]>;
  /** CreateNetworkInterface with tags and secondary IPs or /28 prefixes; the new ENI (`available`). */
  createEni(p: CreateEniRequest): Promise<Ec2Eni>;
  /** AttachNetworkInterface at a device index; the attachment id. */
  attachEni(eniId: string, instanceId: string, deviceIndex: number): Promise<string>;
  /** ModifyNetworkInterfaceAttribute: DeleteOnTermination=true on the attachment. */
  setDeleteOnTermination(eniId: string, attachmentId: string): Promise<void>;
  /** AssignPrivateIpAddresses by count; the assigned IPs. */
  assignIps(eniId: string, count: number): Promise<string[]>;
  /** UnassignPrivateIpAddresses of secondary IPs (no call for []). */
  unassignIps(eniId: string, ips: string[]): Promise<void>;
  /** AssignPrivateIpAddresses with `Ipv4PrefixCount`; the assigned /28 prefixes. */
  assignPrefixes(eniId: string, count: number): Promise<string[]>;
  /** UnassignPrivateIpAddresses of /28 prefixes (no call for []). */
  unassignPrefixes(eniId: string, prefixes: string[]): Promise<void>;
  /**
   * AssignIpv6Addresses with `Ipv6PrefixCount`: `count` /80 IPv6 prefixes from the ENI's
   * subnet's /64 (Nitro types only); the assigned prefixes.
   */
  assignIpv6Prefixes(eniId: string, count: number): Promise<string[]>;
  /** DetachNetworkInterface (never forced). */
  detachEni(attachmentId: string): Promise<void>;
  /** DeleteNetworkInterface; `InvalidNetworkInterfaceID.NotFound` counts as success. */
  deleteEni(eniId: string): Promise<void>;
}
