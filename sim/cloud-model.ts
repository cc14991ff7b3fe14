/**
 * The EC2 state machine for ENIs: subnets, instances, ENI create/attach/detach/delete,
 * attachment attributes and tags, with the limits and error codes EC2 applies (AWS EC2
 * API Reference for each action; AWS EC2 User Guide, "Elastic network interfaces").
 * Address assignment lives in `ip-assignment.ts`. Timers (attach/detach transitions)
 * are cleared by {@link CloudModel.stop}.
 */
import { Ec2ApiError, eniNotFound, invalidParameter } from './ec2-errors.js';
import type { FaultInjector, ImdsChangeKind } from './faults.js';
import type { IdGenerator } from './ids.js';
import { addVpcCidr } from './vpc.js';
import { addVpcIpv6Cidr } from './vpc-ipv6.js';
import { newSubnet, type SubnetInput } from './subnet-create.js';
import { UNATTACHED_ENI_IPV4_LIMIT, instanceTypeInfo, type InstanceTypeInfo } from './instance-types.js';
import type { Eni, Instance, SimState, Subnet } from './types.js';

/** Called just before a change that IMDS may show late (`instanceId` = the instance whose view changes). */
export type BeforeChangeHook = (kind: ImdsChangeKind, instanceId: string) => void;

/** Input of {@link CloudModel.createEni}. */
export interface CreateEniInput {
  subnetId: string;
  description?: string;
  privateIpAddress?: string;
  secondaryCount?: number;
  secondaryIps?: string[];
  prefixCount?: number;
  prefixes?: string[];
  tags?: Record<string, string>;
  securityGroupIds?: string[];
}

/** The default security group id every ENI gets when none is given. */
export const DEFAULT_SECURITY_GROUP = 'sg-0default0000000001';

/** Owns {@link SimState} mutations other than address assignment. */
export class CloudModel {
  private readonly timers = new Set<NodeJS.Timeout>();

  constructor(
    readonly state: SimState,
    private readonly ids: IdGenerator,
    /** The fault knobs (handlers read the Describe* page cap). */
    readonly faults: FaultInjector,
    private readonly beforeChange: BeforeChangeHook,
  ) {}

  /**
   * Adds a subnet in the VPC, optionally in another zone of the region, with tags, and
   * with an IPv6 /64 (`ipv6Cidr`: that block, or `true` for the VPC's lowest free /64;
   * `assignIpv6AddressOnCreation` gives each ENI created there one IPv6 address).
   * @throws Error when the CIDR is not a /16–/28 inside one of the VPC's CIDR blocks,
   * overlaps another subnet, the zone is not `<region><letter>`, or the IPv6 block is
   * refused (`vpc-ipv6.ts`).
   */
  addSubnet(p: SubnetInput): Subnet {
    const subnet = newSubnet(this.state, p, () => this.ids.id('subnet'));
    this.state.subnets.set(subnet.subnetId, subnet);
    return subnet;
  }

  /**
   * Takes a subnet's addresses for "other users" (no ENI holds them) so exactly `leaveFree`
   * stay free (default 0: the next create or assign there answers
   * `InsufficientFreeAddressesInSubnet`; /28 prefixes need 16 aligned free addresses, else
   * `InsufficientCidrBlocks`). @returns the addresses taken, for {@link releaseOccupied}.
   * @throws Error for an unknown subnet or when fewer than `leaveFree` are free already.
   */
  occupy(subnetId: string, leaveFree = 0): string[] {
    const s = this.state.subnets.get(subnetId);
    if (!s) throw new Error(`unknown subnet ${subnetId}`);
    const free = s.addresses.freeCount();
    if (free < leaveFree) throw new Error(`subnet ${subnetId} has ${free} free addresses, fewer than ${leaveFree}`);
    return free > leaveFree ? s.addresses.allocate(free - leaveFree) : [];
  }

  /** Gives back addresses {@link occupy} took. @throws Error for an unknown subnet. */
  releaseOccupied(subnetId: string, ips: string[]): void {
    const s = this.state.subnets.get(subnetId);
    if (!s) throw new Error(`unknown subnet ${subnetId}`);
    s.addresses.release(ips);
  }

  /**
   * Associates an IPv6 /56 with the VPC (`vpc-ipv6.ts`; none given = the next
   * Amazon-provided-style block). @throws Error for a bad, overlapping or extra block.
   */
  addVpcIpv6Cidr(cidr?: string): string {
    return addVpcIpv6Cidr(this.state, cidr);
  }

  /**
   * Associates a secondary IPv4 CIDR block with the VPC (see `vpc.ts` for AWS's rules).
   * @throws Error for a bad, overlapping or refused block.
   */
  addVpcCidr(cidr: string): string {
    return addVpcCidr(this.state, cidr);
  }

  /**
   * Launches an instance with its primary ENI (device 0, attached, one primary IP,
   * DeleteOnTermination true, untagged). @throws Error for an unknown type or subnet,
   * Ec2ApiError when the subnet is full.
   */
  launchInstance(p: { instanceType: string; subnetId: string }): Instance {
    if (!instanceTypeInfo(p.instanceType)) throw new Error(`unknown instance type ${p.instanceType}`);
    const subnet = this.state.subnets.get(p.subnetId);
    if (!subnet) throw new Error(`unknown subnet ${p.subnetId}`);
    const instanceId = this.ids.id('i');
    const eni = this.createEni({ subnetId: subnet.subnetId, description: 'Primary network interface' });
    eni.status = 'in-use';
    eni.attachment = {
      attachmentId: this.ids.id('eni-attach'),
      instanceId,
      deviceIndex: 0,
      status: 'attached',
      deleteOnTermination: true,
      attachTime: Date.now(),
    };
    const inst: Instance = {
      instanceId,
      instanceType: p.instanceType,
      subnetId: subnet.subnetId,
      vpcId: subnet.vpcId,
      availabilityZone: subnet.availabilityZone,
      privateIpAddress: eni.primaryIp,
      primaryEniId: eni.networkInterfaceId,
      reservationId: this.ids.id('r'),
      launchTime: Date.now(),
    };
    this.state.instances.set(instanceId, inst);
    return inst;
  }

  /** The ENI with this id. @throws Ec2ApiError InvalidNetworkInterfaceID.NotFound */
  eni(eniId: string): Eni {
    const e = this.state.enis.get(eniId);
    if (!e) throw eniNotFound([eniId]);
    return e;
  }

  /** The instance with this id. @throws Ec2ApiError InvalidInstanceID.NotFound */
  instance(instanceId: string): Instance {
    const i = this.state.instances.get(instanceId);
    if (!i) throw new Ec2ApiError('InvalidInstanceID.NotFound', `The instance ID '${instanceId}' does not exist`);
    return i;
  }

  /** Limits of the instance an ENI is attached to (undefined when unattached). */
  attachedType(eni: Eni): InstanceTypeInfo | undefined {
    const id = eni.attachment?.instanceId;
    const inst = id ? this.state.instances.get(id) : undefined;
    return inst ? instanceTypeInfo(inst.instanceType) : undefined;
  }

  /** Max IPv4 slots of an ENI: its instance type's per-ENI figure, or the unattached cap. */
  ipv4Limit(eni: Eni): number {
    return this.attachedType(eni)?.ipv4PerEni ?? UNATTACHED_ENI_IPV4_LIMIT;
  }

  /** Slots in use: primary + secondary IPs + one per /28 prefix. */
  static slotsUsed(eni: Eni): number {
    return 1 + eni.secondaryIps.length + eni.ipv4Prefixes.length;
  }

  /**
   * CreateNetworkInterface: a new `available` ENI with a primary IP, optional secondary
   * IPs / prefixes and tags. All or nothing: on failure no address stays taken.
   * Security group ids must look like `sg-` + lower-case letters and digits (any such id is accepted:
   * the sim keeps no group list); none given = the VPC's default group.
   * @throws Ec2ApiError InvalidSubnetID.NotFound, InvalidGroupId.Malformed, InvalidParameterValue,
   * PrivateIpAddressLimitExceeded, InsufficientFreeAddressesInSubnet, InsufficientCidrBlocks.
   */
  createEni(p: CreateEniInput): Eni {
    const subnet = this.state.subnets.get(p.subnetId);
    if (!subnet) throw new Ec2ApiError('InvalidSubnetID.NotFound', `The subnet ID '${p.subnetId}' does not exist`);
    const badGroup = p.securityGroupIds?.find((g) => !/^sg-[0-9a-z]+$/.test(g));
    if (badGroup !== undefined)
      throw new Ec2ApiError('InvalidGroupId.Malformed', `Invalid id: "${badGroup}" (expecting "sg-...")`);
    const nIps = (p.secondaryCount ?? 0) + (p.secondaryIps?.length ?? 0);
    const nPrefixes = (p.prefixCount ?? 0) + (p.prefixes?.length ?? 0);
    if (nIps > 0 && nPrefixes > 0)
      throw new Ec2ApiError(
        'InvalidParameterCombination',
        'Secondary private IPv4 addresses and IPv4 prefixes cannot both be specified',
      );
    if (1 + nIps + nPrefixes > UNATTACHED_ENI_IPV4_LIMIT)
      throw new Ec2ApiError('PrivateIpAddressLimitExceeded', 'Number of private addresses will exceed limit.');
    const a = subnet.addresses;
    const taken: string[] = [];
    const takenPrefixes: string[] = [];
    const ipv6: string[] = [];
    try {
      if (p.privateIpAddress) {
        a.allocateSpecific([p.privateIpAddress]);
        taken.push(p.privateIpAddress);
      } else taken.push(...a.allocate(1));
      if (p.secondaryIps?.length) {
        a.allocateSpecific(p.secondaryIps);
        taken.push(...p.secondaryIps);
      }
      if (p.secondaryCount) taken.push(...a.allocate(p.secondaryCount));
      if (p.prefixes?.length) takenPrefixes.push(...a.allocateSpecificPrefixes(p.prefixes));
      if (p.prefixCount) takenPrefixes.push(...a.allocatePrefixes(p.prefixCount));
      if (subnet.ipv6 && subnet.assignIpv6AddressOnCreation) ipv6.push(...subnet.ipv6.addresses.allocate(1));
    } catch (e) {
      a.release(taken);
      a.releasePrefixes(takenPrefixes);
      throw e;
    }
    const eni: Eni = {
      networkInterfaceId: this.ids.id('eni'),
      subnetId: subnet.subnetId,
      vpcId: subnet.vpcId,
      availabilityZone: subnet.availabilityZone,
      description: p.description ?? '',
      macAddress: this.ids.mac(),
      primaryIp: taken[0]!,
      secondaryIps: taken.slice(1),
      ipv4Prefixes: takenPrefixes,
      ipv6Addresses: ipv6,
      ipv6Prefixes: [],
      status: 'available',
      tags: { ...p.tags },
      securityGroupIds: p.securityGroupIds?.length ? [...p.securityGroupIds] : [DEFAULT_SECURITY_GROUP],
      sourceDestCheck: true,
      ownerId: this.state.accountId,
      createdAt: Date.now(),
    };
    this.state.enis.set(eni.networkInterfaceId, eni);
    return eni;
  }

  /**
   * AttachNetworkInterface. Returns the attachment id. With an attach delay the ENI is
   * `attaching` until the timer fires.
   * @throws Ec2ApiError InvalidNetworkInterfaceID.NotFound, InvalidInstanceID.NotFound,
   * InvalidNetworkInterface.InUse, InvalidParameterValue (device index taken / other AZ),
   * AttachmentLimitExceeded, PrivateIpAddressLimitExceeded (ENI holds more than the type allows).
   */
  attachEni(eniId: string, instanceId: string, deviceIndex: number): string {
    const eni = this.eni(eniId);
    const inst = this.instance(instanceId);
    const type = instanceTypeInfo(inst.instanceType)!;
    if (eni.attachment) throw new Ec2ApiError('InvalidNetworkInterface.InUse', `Interface: [${eniId}] in use.`);
    if (eni.availabilityZone !== inst.availabilityZone)
      throw invalidParameter(
        `Network interface '${eniId}' is in a different availability zone than instance '${instanceId}'`,
      );
    const attached = [...this.state.enis.values()].filter((e) => e.attachment?.instanceId === instanceId);
    if (attached.some((e) => e.attachment!.deviceIndex === deviceIndex)) {
      throw invalidParameter(
        `Instance '${instanceId}' already has an interface attached at device index '${deviceIndex}'.`,
      );
    }
    if (attached.length >= type.maxEnis) {
      throw new Ec2ApiError(
        'AttachmentLimitExceeded',
        `Interface count ${attached.length + 1} exceeds the limit for ${inst.instanceType}`,
      );
    }
    if (CloudModel.slotsUsed(eni) > type.ipv4PerEni)
      throw new Ec2ApiError(
        'PrivateIpAddressLimitExceeded',
        `Number of private addresses will exceed limit for ${inst.instanceType}.`,
      );
    if (eni.ipv4Prefixes.length > 0 && type.hypervisor !== 'nitro')
      throw invalidParameter(`Instance type ${inst.instanceType} does not support IPv4 prefixes`);
    if (eni.ipv6Addresses.length + eni.ipv6Prefixes.length > type.ipv6PerEni)
      throw invalidParameter(`Number of IPv6 addresses and prefixes will exceed limit for ${inst.instanceType}.`);
    if (eni.ipv6Prefixes.length > 0 && type.hypervisor !== 'nitro')
      throw invalidParameter(`Instance type ${inst.instanceType} does not support IPv6 prefixes`);
    this.beforeChange('attach', instanceId);
    const delay = this.faults.attachDelayMs;
    const att = {
      attachmentId: this.ids.id('eni-attach'),
      instanceId,
      deviceIndex,
      status: 'attached' as 'attaching' | 'attached' | 'detaching',
      deleteOnTermination: false,
      attachTime: Date.now(),
    };
    eni.attachment = att;
    if (delay > 0) {
      eni.status = 'attaching';
      att.status = 'attaching';
      this.later(delay, () => {
        if (eni.attachment === att && att.status === 'attaching') {
          att.status = 'attached';
          eni.status = 'in-use';
        }
      });
    } else {
      eni.status = 'in-use';
    }
    return att.attachmentId;
  }

  /**
   * DetachNetworkInterface. The primary ENI cannot be detached. With a detach delay the
   * ENI is `detaching` until the timer fires.
   * @throws Ec2ApiError InvalidAttachmentID.NotFound, OperationNotPermitted.
   */
  detachEni(attachmentId: string): void {
    const eni = this.eniByAttachment(attachmentId);
    const att = eni.attachment!;
    if (att.deviceIndex === 0)
      throw new Ec2ApiError('OperationNotPermitted', 'The network interface at device index 0 cannot be detached.');
    if (att.status === 'detaching') return;
    this.beforeChange('detach', att.instanceId);
    const finish = (): void => {
      if (eni.attachment === att) {
        delete eni.attachment;
        eni.status = 'available';
      }
    };
    const delay = this.faults.detachDelayMs;
    if (delay > 0) {
      att.status = 'detaching';
      eni.status = 'detaching';
      this.later(delay, finish);
    } else {
      finish();
    }
  }

  /**
   * DeleteNetworkInterface: frees all its addresses to the subnet.
   * @throws Ec2ApiError InvalidNetworkInterfaceID.NotFound, InvalidParameterValue (in use).
   */
  deleteEni(eniId: string): void {
    const eni = this.eni(eniId);
    if (eni.attachment || eni.status !== 'available')
      throw invalidParameter(`Network interface '${eniId}' is currently in use.`);
    this.state.enis.delete(eniId);
    const a = this.state.subnets.get(eni.subnetId)!.addresses;
    a.release([eni.primaryIp, ...eni.secondaryIps]);
    a.releasePrefixes(eni.ipv4Prefixes);
    const a6 = this.state.subnets.get(eni.subnetId)!.ipv6?.addresses;
    a6?.release(eni.ipv6Addresses);
    a6?.releasePrefixes(eni.ipv6Prefixes);
  }

  /** The ENI holding an attachment. @throws Ec2ApiError InvalidAttachmentID.NotFound */
  eniByAttachment(attachmentId: string): Eni {
    for (const e of this.state.enis.values()) if (e.attachment?.attachmentId === attachmentId) return e;
    throw new Ec2ApiError('InvalidAttachmentID.NotFound', `The attachment ID '${attachmentId}' does not exist`);
  }

  /**
   * CreateTags: adds/overwrites tags on ENIs, subnets, instances or the VPC (ENIs and
   * subnets hold their own; instances and the VPC keep them on the side in `resourceTags`).
   * @throws Ec2ApiError Invalid<Type>ID.NotFound, InvalidID.
   */
  createTags(resourceIds: string[], tags: Record<string, string>): void {
    const targets = resourceIds.map((id) => this.taggable(id));
    for (const t of targets) Object.assign(t, tags);
  }

  /** CreateNetworkInterface ClientToken → the ENI id it created. */
  readonly clientTokens = new Map<string, string>();

  /** Tags of instances and the VPC (ENIs and subnets hold their own). */
  readonly resourceTags = new Map<string, Record<string, string>>();

  private taggable(id: string): Record<string, string> {
    if (id.startsWith('eni-') && !id.startsWith('eni-attach-')) return this.eni(id).tags;
    if (id.startsWith('i-')) this.instance(id);
    else if (id.startsWith('subnet-')) {
      const subnet = this.state.subnets.get(id);
      if (!subnet) throw new Ec2ApiError('InvalidSubnetID.NotFound', `The subnet ID '${id}' does not exist`);
      return subnet.tags;
    } else if (id !== this.state.vpcId) throw new Ec2ApiError('InvalidID', `The ID '${id}' is not valid`);
    let t = this.resourceTags.get(id);
    if (!t) {
      t = {};
      this.resourceTags.set(id, t);
    }
    return t;
  }

  /** Tells the IMDS view that `instanceId`'s metadata is about to change (for the lag knob). */
  notifyChange(kind: ImdsChangeKind, instanceId: string): void {
    this.beforeChange(kind, instanceId);
  }

  /** Clears pending transition timers. */
  stop(): void {
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
  }

  private later(ms: number, fn: () => void): void {
    const t = setTimeout(() => {
      this.timers.delete(t);
      fn();
    }, ms);
    this.timers.add(t);
  }
}
