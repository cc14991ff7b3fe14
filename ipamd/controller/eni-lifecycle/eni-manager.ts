/**
 * ENI lifecycle: create + tag + attach + DeleteOnTermination for growth
 * (`eni-create.ts`), and detach + wait + delete for shrink (`eni-free.ts`), over the
 * bookkeeping of half-done work and device indexes (`eni-book.ts`). docs/design.md#eni-ownership.
 *
 * Ownership: ENIs we create carry `node.k8s.amazonaws.com/instance_id=<id>` and
 * `node.k8s.amazonaws.com/createdAt=<RFC 3339>` (plus the cluster tag and
 * ADDITIONAL_ENI_TAGS) and the description `aws-K8S-<instance id>`. Untagged or
 * `no_manage=true` ENIs are never touched.
 *
 * An attached ENI becomes usable (its addresses enter the datastore as available) only
 * after the optional `beforeEniUsable` hook (host networking: link, route table, rule)
 * has succeeded for it; until then it is pending, and the reconcile retries.
 */
import { monoNow } from '../../clock.js';
import type { EniInventory, PoolCounts, ReleasePhases } from '../../datastore/roles.js';
import type { EniInfo } from '../../datastore/types.js';
import type { Ec2Port, Ec2Eni } from '../../cloud/ec2-port.js';
import type { Logger } from '../../log.js';
import type { ReleaseGate } from '../release/release-gate.js';
import { EniBook } from './eni-book.js';
import { attachOwnEni, createAndAttachEni, type EniCreateContext, type InstanceContext } from './eni-create.js';
import { freeEni, retryOrphans, type EniFreeContext, type FreeOptions } from './eni-free.js';
import { eniCreatedAtMs } from './eni-ownership.js';
import { realSleep, type ImdsEniLister, type Sleep } from './eni-wait.js';
import type { EniPlacement } from './placement-types.js';
import { nodeSubnetPlacement, type SubnetPlacement } from './subnet-placement-source.js';

export {
  ENI_DESCRIPTION_PREFIX,
  TAG_CLUSTER_NAME,
  TAG_CREATED_AT,
  TAG_INSTANCE_ID,
  TAG_NO_MANAGE,
  eniCreatedAtMs,
  isOurEni,
} from './eni-ownership.js';
export type { InstanceContext } from './eni-create.js';
export type { FreeOptions } from './eni-free.js';
export type { ImdsEniLister } from './eni-wait.js';

/** Options of {@link EniManager}. */
export interface EniManagerOptions {
  ec2: Ec2Port;
  ds: ReleasePhases & EniInventory & PoolCounts;
  gate: ReleaseGate;
  log: Logger;
  instance: InstanceContext;
  clusterName?: string;
  additionalTags: Record<string, string>;
  /** Device indexes taken by attached ENIs we do not manage. */
  unmanagedDeviceIndexes: Set<number>;
  /** IMDS, to wait until a new ENI is listed before serving from it (omit: EC2 alone decides). */
  imds?: ImdsEniLister;
  /** How long createAndAttach waits for IMDS to list a new ENI before leaving it to the reconcile (ms, default 30 000). */
  imdsWaitMs?: number;
  now?: () => number;
  /** Waits between EC2/IMDS polls (ms; default a real timer; tests advance a virtual clock). */
  sleep?: Sleep;
  /** How long to wait for an attachment to settle (ms, default 60 000). */
  settleTimeoutMs?: number;
  /**
   * Runs after an ENI of ours is attached (and listed by IMDS) and before any of its
   * addresses enter the datastore as available, e.g. its host networking (link, route
   * table, ip rule). If it throws, the ENI stays pending (not served from) and the
   * reconcile retries later. Must be idempotent.
   */
  beforeEniUsable?: (eni: EniInfo) => Promise<void>;
  /** ENABLE_PREFIX_DELEGATION: new ENIs are created with /28 prefixes (Ipv4PrefixCount) instead of secondary IPs. */
  prefixDelegation?: boolean;
  /**
   * Where new ENIs go (subnet discovery, custom networking) and the exhausted marks
   * (default: the node's subnet only, marks lasting `exhaustedMs`).
   */
  placement?: EniPlacement & Partial<Pick<SubnetPlacement, 'noteCreated' | 'cidrOf'>>;
  /** The default placement's exhausted time (ms, default 30 000; the pool's `subnetFullPauseMs`). */
  exhaustedMs?: number;
  /** The node's VPC and zone (the default placement's facts; default empty). */
  vpcId?: string;
  availabilityZone?: string;
  /** EC2 answered that a subnet is full during a creation (metrics). */
  onSubnetFull?: (subnetId: string) => void;
}

/** Creates, attaches, detaches and deletes this node's ENIs. */
export class EniManager extends EniBook {
  /** Attached ENIs whose DeleteOnTermination could not be set yet (the reconcile retries). */
  readonly needsDeleteOnTermination = new Set<string>();
  /** Hooks in progress, per ENI (one at a time). */
  private readonly preparing = new Map<string, Promise<EniInfo | undefined>>();
  private readonly createCtx: EniCreateContext;
  private readonly freeCtx: EniFreeContext;
  /** Where new ENIs go, and which subnets are exhausted now. */
  readonly placement: NonNullable<EniManagerOptions['placement']>;
  /** IPv4 CIDR per subnet id: the node's, each new ENI's candidate, each adopted ENI's from IMDS. */
  private readonly subnetCidrs = new Map<string, string>();

  constructor(private readonly o: EniManagerOptions) {
    super(o.ds, o.unmanagedDeviceIndexes, o.now ?? monoNow);
    const settleMs = o.settleTimeoutMs ?? 60_000;
    const sleep = o.sleep ?? realSleep;
    this.subnetCidrs.set(o.instance.subnetId, o.instance.subnetCidr);
    this.placement =
      o.placement ??
      nodeSubnetPlacement(
        {
          subnetId: o.instance.subnetId,
          cidr: o.instance.subnetCidr,
          vpcId: o.vpcId ?? '',
          availabilityZone: o.availabilityZone ?? '',
          securityGroupIds: o.instance.securityGroupIds,
        },
        o.log,
        { now: this.now, ...(o.exhaustedMs !== undefined ? { exhaustedMs: o.exhaustedMs } : {}) },
      );
    this.createCtx = {
      ec2: o.ec2,
      log: o.log,
      instance: o.instance,
      additionalTags: o.additionalTags,
      prefixDelegation: o.prefixDelegation ?? false,
      ...(o.clusterName ? { clusterName: o.clusterName } : {}),
      ...(o.imds ? { imds: o.imds } : {}),
      imdsWaitMs: o.imdsWaitMs ?? 30_000,
      settleMs,
      now: this.now,
      sleep,
      inFlight: this.inFlightIds,
      needsDeleteOnTermination: this.needsDeleteOnTermination,
      attachedPending: (eniId, deviceIndex) => {
        this.markPending(eniId, deviceIndex);
        this.releaseDeviceIndex(deviceIndex);
      },
      adopt: (eni) => this.adoptWhenUsable(eni),
      placement: this.placement,
      placed: (candidate, eni) => {
        this.learnSubnetCidr(eni.subnetId || candidate.subnetId, candidate.cidr);
        const addresses = eni.ipv4Prefixes.length * 16 + eni.secondaryIps.length + 1;
        this.placement.noteCreated?.(candidate.subnetId, addresses);
      },
      ...(o.onSubnetFull ? { onSubnetFull: o.onSubnetFull } : {}),
    };
    this.freeCtx = {
      ds: o.ds,
      ec2: o.ec2,
      gate: o.gate,
      log: o.log,
      instanceId: o.instance.instanceId,
      now: this.now,
      sleep,
      settleMs,
      inFlight: this.inFlightIds,
      orphans: this.orphans,
      markOrphan: (id, idx) => this.markOrphan(id, idx),
    };
  }

  /** The instance facts this manager works with. */
  get instance(): InstanceContext {
    return this.o.instance;
  }

  /**
   * Puts an attached ENI of ours, with the secondary IPs and prefixes EC2 shows on it,
   * into the datastore (EC2 is the truth for its content) and clears its pending/orphan
   * marks. With a `beforeEniUsable` hook the ENI is instead marked pending and adopted
   * in the background once the hook succeeded ({@link adoptWhenUsable}).
   * @returns the ENI's datastore info, or undefined when adoption waits for the hook.
   */
  adopt(eni: Ec2Eni): EniInfo | undefined {
    if (!this.o.beforeEniUsable) return this.putInDatastore(eni);
    this.markPending(eni.eniId, this.infoOf(eni).deviceNumber);
    void this.adoptWhenUsable(eni);
    return undefined;
  }

  /**
   * Runs the `beforeEniUsable` hook for the ENI (at most one run per ENI at a time), then
   * puts it into the datastore — unless it stopped being pending meanwhile (the reconcile
   * found it detaching or gone). A failing hook leaves the ENI pending (logged; the
   * reconcile retries). Never throws.
   * @returns the ENI's datastore info, or undefined when it was not adopted.
   */
  adoptWhenUsable(eni: Ec2Eni): Promise<EniInfo | undefined> {
    const hook = this.o.beforeEniUsable;
    if (!hook) return Promise.resolve(this.putInDatastore(eni));
    const running = this.preparing.get(eni.eniId);
    if (running) return running;
    const info = this.infoOf(eni);
    this.markPending(eni.eniId, info.deviceNumber);
    const run = (async () => {
      try {
        await hook(info);
      } catch (e) {
        this.o.log.warn(
          { eniId: eni.eniId, deviceNumber: info.deviceNumber, err: (e as Error).message },
          'ENI not made usable: its setup hook failed; its IPs are not served, the reconcile retries',
        );
        return undefined;
      }
      if (!this.pending.has(eni.eniId)) {
        this.o.log.info(
          { eniId: eni.eniId },
          'ENI left the pending set while being made usable (detaching or gone); not adopted',
        );
        return undefined;
      }
      return this.putInDatastore(eni);
    })().finally(() => this.preparing.delete(eni.eniId));
    this.preparing.set(eni.eniId, run);
    return run;
  }

  /**
   * Creates a tagged ENI with `secondaryCount` secondary IPs (prefix delegation: /28
   * prefixes) and attaches it at a device index reserved synchronously on call, so
   * parallel calls never collide; see {@link createAndAttachEni}.
   * @returns the new ENI's info, or undefined when it was left pending. @throws Ec2Error
   */
  async createAndAttach(secondaryCount: number): Promise<EniInfo | undefined> {
    const deviceIndex = this.reserveDeviceIndex();
    try {
      return await createAndAttachEni(this.createCtx, secondaryCount, deviceIndex);
    } finally {
      this.releaseDeviceIndex(deviceIndex);
    }
  }

  /**
   * Attaches an `available` ENI of ours a previous ipamd created and never attached
   * (eni-settle.ts), at a device index reserved synchronously on call; see
   * {@link attachOwnEni}. `subnetCidr`: its subnet's CIDR (the placement candidate's).
   * @returns the ENI's info, or undefined when it was left pending. @throws Ec2Error
   */
  async attachLeftover(eni: Ec2Eni, subnetCidr: string): Promise<EniInfo | undefined> {
    this.learnSubnetCidr(eni.subnetId, subnetCidr);
    const deviceIndex = this.reserveDeviceIndex();
    try {
      return await attachOwnEni(this.createCtx, eni, deviceIndex);
    } finally {
      this.releaseDeviceIndex(deviceIndex);
    }
  }

  /** Frees an empty ENI of ours; see {@link freeEni}. @throws Ec2Error on a failure before the detach. */
  free(eniId: string, opts: FreeOptions = {}): Promise<boolean> {
    return freeEni(this.freeCtx, eniId, opts);
  }

  /** Retries the deletion of orphans; see {@link retryOrphans}. @returns the ENIs deleted (or found gone). */
  retryOrphans(): Promise<string[]> {
    return retryOrphans(this.freeCtx);
  }

  /**
   * Records the IPv4 CIDR of a subnet an ENI of ours is in (from the placement candidate
   * it was created in, or IMDS `subnet-ipv4-cidr-block` of an ENI being adopted): the
   * ENI's route table gateway comes from it. An empty CIDR is ignored.
   */
  learnSubnetCidr(subnetId: string, cidr: string): void {
    if (subnetId && cidr) this.subnetCidrs.set(subnetId, cidr);
  }

  /** The IPv4 CIDR known for a subnet (see {@link learnSubnetCidr}), else undefined. */
  subnetCidrOf(subnetId: string): string | undefined {
    return this.subnetCidrs.get(subnetId) ?? this.placement.cidrOf?.(subnetId);
  }

  /**
   * The datastore info for an ENI EC2 describes: its own subnet's CIDR (the node's when
   * it is in the node subnet or, for want of any other fact, logged: the reconcile adopts
   * no ENI whose subnet CIDR is unknown, and a created ENI's comes from its placement);
   * slots per ENI as capacity.
   */
  private infoOf(eni: Ec2Eni): EniInfo {
    const { instance } = this.o;
    const subnetId = eni.subnetId || instance.subnetId;
    let subnetCidr = this.subnetCidrOf(subnetId);
    if (!subnetCidr) {
      this.o.log.warn(
        { eniId: eni.eniId, subnetId },
        "ENI's subnet CIDR unknown (not described, not in IMDS): using the node subnet's",
      );
      subnetCidr = instance.subnetCidr;
    }
    return {
      eniId: eni.eniId,
      mac: eni.mac,
      deviceNumber: eni.attachment?.deviceIndex ?? this.firstFreeDeviceIndex(),
      subnetId,
      subnetCidr,
      primaryIp: eni.primaryIp,
      isPrimary: false,
      // An EC2 tag is a wall-clock stamp: one in the future (clock stepped back) counts as now (docs/design.md#time).
      createdAtMs: Math.min(eniCreatedAtMs(eni) ?? Infinity, this.now()),
      capacity: instance.ipsPerEni,
    };
  }

  private putInDatastore(eni: Ec2Eni): EniInfo {
    const info = this.infoOf(eni);
    this.forget(eni.eniId);
    this.ds.upsertEni(info);
    this.ds.addIps(eni.eniId, eni.secondaryIps);
    this.ds.addPrefixes(eni.eniId, eni.ipv4Prefixes);
    if (eni.attachment && !eni.attachment.deleteOnTermination) this.needsDeleteOnTermination.add(eni.eniId);
    return info;
  }
}
