/**
 * The node's inventory type: what start-up discovery found, read by the long-running parts
 * below start-up (the ENI lifecycle, host networking, status), so it lives with the cloud
 * clients rather than with the step that builds it. Types only.
 */
import type { Ec2Api, Ec2Eni, InstanceTypeLimits } from './ec2.js';
import type { ImdsClient, ImdsEni, ImdsInstance } from './imds.js';

/** What start-up discovery (startup/discover.ts) found: the node as IMDS and EC2 describe it. */
export interface NodeInventory {
  instance: ImdsInstance;
  limits: InstanceTypeLimits;
  /** The primary ENI as IMDS describes it (subnet, security groups, VPC CIDRs). */
  primary: ImdsEni;
  /** Every VPC IPv4 CIDR block (IMDS `vpc-ipv4-cidr-blocks`: primary and secondary blocks), read at this start. */
  vpcCidrs: string[];
  /**
   * Subnet id → IPv4 CIDR (IMDS per-MAC `subnet-ipv4-cidr-block`) for the subnet of every
   * managed ENI, foreign subnets included: each ENI's route table uses its own subnet's router.
   */
  subnetCidrs: ReadonlyMap<string, string>;
  /** Attached ENIs ipamd manages (primary + ours), as EC2 describes them. */
  managed: Ec2Eni[];
  /** Attached ENIs we must not touch (untagged or no_manage=true). */
  unmanaged: Ec2Eni[];
  ec2: Ec2Api;
  /** The IMDS client (a hint: used to wait until the OS sees a new ENI). */
  imds: ImdsClient;
  /** The ENIs IMDS listed at discovery. */
  imdsEnis: ImdsEni[];
  /**
   * Where `managed`/`unmanaged` came from: `ec2` (a describe at this start) or `cache`
   * (this boot's inventory cache, not yet confirmed by EC2: the caller freezes releases
   * until a describe confirms it; see inventory-cache.ts).
   */
  source: 'ec2' | 'cache';
}
