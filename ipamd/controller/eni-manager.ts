/**
 * ENI lifecycle: create + tag + attach + DeleteOnTermination for growth, and
 * detach + wait + delete for shrink (DESIGN §3 "ENI ownership").
 *
 * Ownership: ENIs we create carry `node.k8s.amazonaws.com/instance_id=<id>` and
 * `node.k8s.amazonaws.com/createdAt=<RFC 3339>` (plus the cluster tag and
 * ADDITIONAL_ENI_TAGS) and the description `aws-K8S-<instance id>`. Untagged or
 * `no_manage=true` ENIs are never touched.
 */
import type { Datastore } from '../datastore/datastore.js';
import type { EniInfo } from '../datastore/types.js';
import { Ec2Error, type Ec2Api, type Ec2Eni } from '../cloud/ec2.js';
import type { Logger } from '../log.js';
import type { ReleaseGate } from './release-gate.js';

/** Tag keys (compatible with amazon-vpc-cni-k8s, so existing tooling recognises our ENIs). */
export const TAG_INSTANCE_ID = 'node.k8s.amazonaws.com/instance_id';
export const TAG_CREATED_AT = 'node.k8s.amazonaws.com/createdAt';
export const TAG_NO_MANAGE = 'node.k8s.amazonaws.com/no_manage';
export const TAG_CLUSTER_NAME = 'cluster.k8s.amazonaws.com/name';

/** The instance facts the ENI manager needs. */
export interface InstanceContext {
  instanceId: string;
  /** Subnet and security groups of the primary ENI: new ENIs go there. */
  subnetId: string;
  subnetCidr: string;
  securityGroupIds: string[];
  /** Max ENIs (instance limit, capped by MAX_ENI). */
  maxEnis: number;
  /** Secondary IPs per ENI (Ipv4AddressesPerInterface − 1). */
  ipsPerEni: number;
}

/** Options of {@link EniManager}. */
export interface EniManagerOptions {
  ec2: Ec2Api;
  ds: Datastore;
  gate: ReleaseGate;
  log: Logger;
  instance: InstanceContext;
  clusterName?: string;
  additionalTags: Record<string, string>;
  /** Device indexes taken by attached ENIs we do not manage. */
  unmanagedDeviceIndexes: Set<number>;
  now?: () => number;
  /** How long to wait for an attachment to settle (ms, default 60 000). */
  settleTimeoutMs?: number;
}

/** True if ipamd may manage this ENI: ours (tagged with our instance id) and not `no_manage=true`. */
export function isOurEni(eni: Ec2Eni, instanceId: string): boolean {
  return eni.tags[TAG_INSTANCE_ID] === instanceId && eni.tags[TAG_NO_MANAGE] !== 'true';
}

/** Creates, attaches, detaches and deletes this node's ENIs. */
export class EniManager {
  private readonly now: () => number;
  private readonly settleMs: number;

  constructor(private readonly o: EniManagerOptions) {
    this.now = o.now ?? Date.now;
    this.settleMs = o.settleTimeoutMs ?? 60_000;
  }

  /** Number of ENIs attached (managed and unmanaged). */
  attachedCount(): number {
    return this.o.ds.listEnis().length + this.o.unmanagedDeviceIndexes.size;
  }

  /** The lowest device index no attached ENI uses. */
  firstFreeDeviceIndex(): number {
    const used = new Set<number>([...this.o.unmanagedDeviceIndexes, ...this.o.ds.listEnis().map((e) => e.deviceNumber)]);
    let i = 1;
    while (used.has(i)) i++;
    return i;
  }

  /**
   * Creates a tagged ENI with `secondaryCount` secondary IPs in the primary ENI's subnet,
   * attaches it at the first free device index, sets DeleteOnTermination, waits for the
   * attachment, and adds it with its IPs to the datastore.
   * If the attach fails, the new (unattached, ours) ENI is deleted again.
   * @returns the new ENI's info. @throws Ec2Error
   */
  async createAndAttach(secondaryCount: number): Promise<EniInfo> {
    const { ec2, instance, log } = this.o;
    const createdAt = this.now();
    const tags: Record<string, string> = {
      ...this.o.additionalTags,
      [TAG_INSTANCE_ID]: instance.instanceId,
      [TAG_CREATED_AT]: new Date(createdAt).toISOString().replace(/\.\d{3}Z$/, 'Z'),
      ...(this.o.clusterName ? { [TAG_CLUSTER_NAME]: this.o.clusterName } : {}),
    };
    const deviceIndex = this.firstFreeDeviceIndex();
    const eni = await ec2.createEni({
      subnetId: instance.subnetId, description: `aws-K8S-${instance.instanceId}`, tags,
      secondaryCount: Math.min(secondaryCount, instance.ipsPerEni), securityGroupIds: instance.securityGroupIds,
    });
    log.info({ eniId: eni.eniId, deviceIndex, secondaryIps: eni.secondaryIps.length }, 'created ENI');
    let attachmentId: string;
    try {
      attachmentId = await ec2.attachEni(eni.eniId, instance.instanceId, deviceIndex);
    } catch (e) {
      log.warn({ eniId: eni.eniId, err: (e as Error).message }, 'attach failed; deleting the new ENI');
      await ec2.deleteEni(eni.eniId).catch((d: Error) => log.error({ eniId: eni.eniId, err: d.message }, 'could not delete unattached ENI; the leaked-ENI sweep will retry'));
      throw e;
    }
    await ec2.setDeleteOnTermination(eni.eniId, attachmentId);
    const settled = await this.waitForAttachment(eni.eniId, 'attached');
    const info: EniInfo = {
      eniId: eni.eniId, mac: settled.mac || eni.mac, deviceNumber: deviceIndex, subnetId: instance.subnetId,
      subnetCidr: instance.subnetCidr, primaryIp: settled.primaryIp || eni.primaryIp, isPrimary: false,
      createdAtMs: createdAt, capacity: instance.ipsPerEni,
    };
    this.o.ds.upsertEni(info);
    this.o.ds.addIps(eni.eniId, settled.secondaryIps);
    log.info({ eniId: eni.eniId, deviceIndex, attachmentId, ips: settled.secondaryIps.length }, 'attached ENI');
    return info;
  }

  /**
   * Frees an ENI that holds no assigned or cooling address: detach (never forced),
   * wait until EC2 reports it `available`, delete (NotFound counts as deleted).
   * Refuses (returns false) while releases are frozen or the ENI holds anything in use.
   * @throws Ec2Error on EC2 failure (the ENI stays in the datastore, its IPs released back).
   */
  async free(eniId: string): Promise<boolean> {
    const { ds, ec2, gate, log } = this.o;
    const info = ds.getEni(eniId);
    if (!info || info.isPrimary) return false;
    if (gate.frozen) {
      log.info({ eniId, reasons: gate.describe() }, 'not freeing ENI: releases are frozen');
      return false;
    }
    const now = this.now();
    const reserved = ds.reserveAllForRelease(eniId, now);
    const view = ds.poolViews(now).find((v) => v.eniId === eniId);
    if (!view || view.total !== 0) {
      ds.cancelRelease(reserved);
      return false;
    }
    try {
      const [eni] = await ec2.describeEnis([eniId]);
      if (!eni || !isOurEni(eni, this.o.instance.instanceId)) {
        ds.cancelRelease(reserved);
        log.warn({ eniId }, 'not freeing ENI: not tagged as ours');
        return false;
      }
      if (gate.frozen) {
        ds.cancelRelease(reserved);
        return false;
      }
      if (eni.attachment) {
        await ec2.detachEni(eni.attachment.attachmentId);
        await this.waitForAttachment(eniId, 'detached');
      }
      await ec2.deleteEni(eniId);
    } catch (e) {
      if (!(e instanceof Ec2Error && e.code === 'InvalidNetworkInterfaceID.NotFound')) {
        ds.cancelRelease(reserved);
        throw e;
      }
    }
    ds.removeEni(eniId, this.now());
    log.info({ eniId, deviceNumber: info.deviceNumber }, 'freed ENI');
    return true;
  }

  private async waitForAttachment(eniId: string, want: 'attached' | 'detached'): Promise<Ec2Eni> {
    const deadline = this.now() + this.settleMs;
    let delay = 100;
    for (;;) {
      const [eni] = await this.o.ec2.describeEnis([eniId]);
      if (!eni) throw new Ec2Error('DescribeNetworkInterfaces', 'InvalidNetworkInterfaceID.NotFound', `${eniId} vanished`);
      if (want === 'attached' && eni.attachment?.status === 'attached') return eni;
      if (want === 'detached' && eni.status === 'available' && (!eni.attachment || eni.attachment.status === 'detached')) return eni;
      if (this.now() > deadline) throw new Ec2Error('DescribeNetworkInterfaces', 'Timeout', `${eniId} not ${want} after ${this.settleMs} ms`);
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 2000);
    }
  }
}
