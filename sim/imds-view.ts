/**
 * What IMDS shows for an instance (AWS EC2 User Guide, "Instance metadata categories"),
 * derived from EC2 state, with the lag knob: after a change with lag N ms, the
 * instance's metadata stays as it was before the change for N ms. Views become visible
 * in order (a later change is never shown before an earlier one).
 */
import { vpcCidrBlocks, type SimState } from './types.js';

/** One attached ENI as IMDS lists it under `network/interfaces/macs/<mac>/`. */
export interface ImdsEniView {
  mac: string;
  eniId: string;
  deviceNumber: number;
  subnetId: string;
  subnetCidr: string;
  vpcId: string;
  vpcCidrs: string[];
  securityGroupIds: string[];
  /** Primary IP first, then secondary IPs. */
  localIpv4s: string[];
  ipv4Prefixes: string[];
  /** IPv6 addresses of the ENI (IMDS `ipv6s`); empty = the path is absent. */
  ipv6s: string[];
  /** Delegated /80 prefixes (IMDS `ipv6-prefix`); empty = absent. */
  ipv6Prefixes: string[];
  /** The subnet's IPv6 blocks (IMDS `subnet-ipv6-cidr-blocks`); empty = absent. */
  subnetIpv6Cidrs: string[];
  /** The VPC's IPv6 blocks (IMDS `vpc-ipv6-cidr-blocks`); empty = absent. */
  vpcIpv6Cidrs: string[];
}

/** Metadata of one instance. */
export interface ImdsInstanceView {
  instanceId: string;
  instanceType: string;
  imageId: string;
  region: string;
  availabilityZone: string;
  accountId: string;
  privateIp: string;
  primaryMac: string;
  /** The primary ENI's first IPv6 address (IMDS `ipv6`); undefined = the path is absent. */
  ipv6?: string;
  /** ms epoch. */
  launchTime: number;
  /** Attached ENIs (attachment status `attached`) by device number. */
  enis: ImdsEniView[];
}

/** Computes the live view of an instance from EC2 state (undefined for an unknown id). */
export function liveInstanceView(state: SimState, instanceId: string): ImdsInstanceView | undefined {
  const inst = state.instances.get(instanceId);
  if (!inst) return undefined;
  // One pass over the account's ENIs, no copy of them: a fleet simulation asks this per IMDS request.
  const attached = [];
  for (const e of state.enis.values())
    if (e.attachment?.instanceId === instanceId && e.attachment.status === 'attached') attached.push(e);
  const enis = attached
    .sort((a, b) => a.attachment!.deviceIndex - b.attachment!.deviceIndex)
    .map((e): ImdsEniView => ({
      mac: e.macAddress,
      eniId: e.networkInterfaceId,
      deviceNumber: e.attachment!.deviceIndex,
      subnetId: e.subnetId,
      subnetCidr: state.subnets.get(e.subnetId)?.cidr ?? '',
      vpcId: e.vpcId,
      vpcCidrs: vpcCidrBlocks(state),
      securityGroupIds: [...e.securityGroupIds],
      localIpv4s: [e.primaryIp, ...e.secondaryIps],
      ipv4Prefixes: [...e.ipv4Prefixes],
      ipv6s: [...e.ipv6Addresses],
      ipv6Prefixes: [...e.ipv6Prefixes],
      subnetIpv6Cidrs: state.subnets.get(e.subnetId)?.ipv6 ? [state.subnets.get(e.subnetId)!.ipv6!.cidr] : [],
      vpcIpv6Cidrs: [...(state.vpcIpv6Cidrs ?? [])],
    }));
  const ipv6 = state.enis.get(inst.primaryEniId)?.ipv6Addresses[0];
  return {
    instanceId,
    instanceType: inst.instanceType,
    imageId: 'ami-0sim000000000000',
    region: state.region,
    availabilityZone: inst.availabilityZone,
    accountId: state.accountId,
    privateIp: inst.privateIpAddress,
    primaryMac: state.enis.get(inst.primaryEniId)?.macAddress ?? '',
    ...(ipv6 ? { ipv6 } : {}),
    launchTime: inst.launchTime,
    enis,
  };
}

/** Per-instance lagged views. `now` is injectable for tests. */
export class ImdsViews {
  private readonly pending = new Map<string, { visibleAt: number; before: ImdsInstanceView }[]>();

  constructor(
    private readonly state: SimState,
    private readonly now: () => number = Date.now,
  ) {}

  /** Call just before a change to `instanceId`'s metadata that IMDS should show `lagMs` late. */
  beforeChange(instanceId: string, lagMs: number): void {
    if (lagMs <= 0) return;
    const before = this.view(instanceId);
    if (!before) return;
    const q = this.pending.get(instanceId) ?? [];
    q.push({ visibleAt: this.now() + lagMs, before });
    this.pending.set(instanceId, q);
  }

  /** The view IMDS serves now: the state before the earliest change not yet visible, else live. */
  view(instanceId: string): ImdsInstanceView | undefined {
    const q = this.pending.get(instanceId);
    if (q) {
      const t = this.now();
      const first = q.find((e) => e.visibleAt > t);
      if (first) return first.before;
      this.pending.delete(instanceId);
    }
    return liveInstanceView(this.state, instanceId);
  }

  /** Drops every pending lag. */
  clear(): void {
    this.pending.clear();
  }
}
