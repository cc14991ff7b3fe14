/**
 * {@link CacheGuardedEc2}: the EC2 port with the ENI inventory cache (inventory-cache.ts)
 * kept in step around each call that changes what the node holds — a decorator over any
 * {@link Ec2Port} (in ipamd the SDK client; in unit tests `MemoryEc2`), handed to the
 * controller instead of the bare client. It replaces patching the shared client's methods
 * in place, so what runs before and after an EC2 call is visible in the type the
 * controller is given.
 *
 * The order is the safety rule of the cache (docs/design.md#4-restore-after-restart): no
 * restart may serve an address EC2 has not confirmed, nor one this ipamd gave back.
 * - give-backs (unassign IPs or /28 prefixes, detach an ENI): the cache is rewritten
 *   without what the call gives back (a detach: the file is deleted until the ENI is
 *   deleted) **before** the call leaves; if that write fails the file is deleted, so the
 *   call still goes out and a restart describes EC2;
 * - assigns (IPs, /28 prefixes): EC2's answer is written to the cache (fsync) **before**
 *   the caller, who puts it into the datastore, gets it; a failed assign writes nothing;
 * - deleteEni: the cache is told once EC2 deleted the ENI (not when the delete failed);
 * - describeEnisByFilters with an `attachment.instance-id` filter: the attached ENIs of the
 *   answer are recorded as the cache's EC2 metadata.
 * Every other call is passed through unchanged. Errors are the inner port's, unchanged.
 */
import type { CreateEniRequest, Ec2Eni, Ec2Port, Ec2Subnet } from './ec2-port.js';
import type { InventoryAdditions, InventoryExclusions } from './inventory-cache.js';

/** What {@link CacheGuardedEc2} needs of the cache (`InventoryCacheWriter` is one). */
export interface InventoryCacheSink {
  /** Writes the file now, leaving out `exclude` and adding `add`. Never rejects. */
  write(exclude?: InventoryExclusions, add?: InventoryAdditions): Promise<void>;
  /** A detach of `attachmentId` is about to be sent (the file is deleted until the ENI is). Never rejects. */
  noteDetach(attachmentId: string): Promise<void>;
  /** EC2 deleted `eniId`. */
  noteDeleted(eniId: string): void;
  /** EC2's description of ENIs (their metadata for later writes). */
  noteDescribed(enis: readonly Ec2Eni[]): void;
}

/** An {@link Ec2Port} that keeps the inventory cache in step around `inner`'s calls (see the module doc). */
export class CacheGuardedEc2 implements Ec2Port {
  /**
   * @param inner the port that talks to EC2 (its errors pass through unchanged);
   * @param cache the inventory cache to keep in step.
   */
  constructor(
    private readonly inner: Ec2Port,
    private readonly cache: InventoryCacheSink,
  ) {}

  /** Passed through. */
  describeEnis(eniIds: string[]): Promise<Ec2Eni[]> {
    return this.inner.describeEnis(eniIds);
  }

  /** Passed through; an answer to a describe by instance (`attachment.instance-id`) feeds the cache its attached ENIs. */
  async describeEnisByFilters(filters: Record<string, string[]>): Promise<Ec2Eni[]> {
    const r = await this.inner.describeEnisByFilters(filters);
    if (filters['attachment.instance-id'])
      this.cache.noteDescribed(r.filter((e) => e.attachment?.status === 'attached'));
    return r;
  }

  /** Passed through. */
  describeSubnet(subnetId: string): Promise<{ cidr: string; availableIps: number; vpcId: string }> {
    return this.inner.describeSubnet(subnetId);
  }

  /** Passed through. */
  describeSubnets(filters: Record<string, string[]>): Promise<Ec2Subnet[]> {
    return this.inner.describeSubnets(filters);
  }

  /** Passed through (a new ENI is not attached yet; its addresses reach the cache once the datastore holds them). */
  createEni(p: CreateEniRequest): Promise<Ec2Eni> {
    return this.inner.createEni(p);
  }

  /** Passed through. */
  attachEni(eniId: string, instanceId: string, deviceIndex: number): Promise<string> {
    return this.inner.attachEni(eniId, instanceId, deviceIndex);
  }

  /** Passed through. */
  setDeleteOnTermination(eniId: string, attachmentId: string): Promise<void> {
    return this.inner.setDeleteOnTermination(eniId, attachmentId);
  }

  /** The assigned IPs, written to the cache before they are returned. */
  async assignIps(eniId: string, count: number): Promise<string[]> {
    const ips = await this.inner.assignIps(eniId, count);
    await this.cache.write(undefined, { eniId, ips });
    return ips;
  }

  /** The cache is rewritten without `ips` first, then the unassign is sent. */
  async unassignIps(eniId: string, ips: string[]): Promise<void> {
    await this.cache.write({ ips: new Set(ips) });
    return this.inner.unassignIps(eniId, ips);
  }

  /** The assigned /28 prefixes, written to the cache before they are returned. */
  async assignPrefixes(eniId: string, count: number): Promise<string[]> {
    const prefixes = await this.inner.assignPrefixes(eniId, count);
    await this.cache.write(undefined, { eniId, prefixes });
    return prefixes;
  }

  /** The cache is rewritten without `prefixes` first, then the unassign is sent. */
  async unassignPrefixes(eniId: string, prefixes: string[]): Promise<void> {
    await this.cache.write({ prefixes: new Set(prefixes) });
    return this.inner.unassignPrefixes(eniId, prefixes);
  }

  /**
   * Passed through: the inventory cache holds no IPv6 yet (IPv6 mode, issue 31, keeps the
   * node's /80 in the checkpoint; the cache learns it when that mode lands).
   */
  assignIpv6Prefixes(eniId: string, count: number): Promise<string[]> {
    return this.inner.assignIpv6Prefixes(eniId, count);
  }

  /** The cache is deleted (until the ENI is deleted) first, then the detach is sent. */
  async detachEni(attachmentId: string): Promise<void> {
    await this.cache.noteDetach(attachmentId);
    return this.inner.detachEni(attachmentId);
  }

  /** The delete is sent; once EC2 answered success the cache is told. */
  async deleteEni(eniId: string): Promise<void> {
    await this.inner.deleteEni(eniId);
    this.cache.noteDeleted(eniId);
  }
}
