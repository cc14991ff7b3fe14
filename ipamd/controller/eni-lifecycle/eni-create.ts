/**
 * Grow side of the ENI lifecycle (docs/design.md#eni-ownership): create a tagged ENI with
 * its secondary IPs (or /28 prefixes) in one CreateNetworkInterface, attach it at a
 * device index reserved beforehand, set DeleteOnTermination, wait for the attachment
 * (EC2) and for IMDS to list it, then hand it to the adopter (which runs the
 * "before usable" hook and puts its addresses into the datastore). Every call goes
 * through the {@link Ec2Port} (in ipamd: Ec2Api, so parallel creations share the node's token bucket).
 */
import { Ec2Error, type Ec2Port, type Ec2Eni } from '../../cloud/ec2-port.js';
import type { EniInfo } from '../../datastore/types.js';
import type { Logger } from '../../log.js';
import { failedForSure } from '../../cloud/ec2-outcome.js';
import { assignShrinking } from './assign-shrink.js';
import { ENI_DESCRIPTION_PREFIX, TAG_CLUSTER_NAME, TAG_CREATED_AT, TAG_INSTANCE_ID } from './eni-ownership.js';
import { waitForAttachment, waitForImds, type ImdsEniLister, type Sleep } from './eni-wait.js';
import type { EniPlacement, PlacementCandidate } from './placement-types.js';
import { PlacementError, SUBNET_FULL_CODES, exhaustedReason } from './subnet-placement.js';

/** The instance facts the ENI manager needs. */
export interface InstanceContext {
  instanceId: string;
  /** Subnet and security groups of the primary ENI (new ENIs go where the placement says). */
  subnetId: string;
  subnetCidr: string;
  securityGroupIds: string[];
  /** Max ENIs (instance limit, capped by MAX_ENI). */
  maxEnis: number;
  /** Secondary IPs per ENI (Ipv4AddressesPerInterface − 1). */
  ipsPerEni: number;
}

/** What a creation needs from the ENI manager. */
export interface EniCreateContext {
  ec2: Ec2Port;
  log: Logger;
  instance: InstanceContext;
  clusterName?: string;
  additionalTags: Record<string, string>;
  /** ENABLE_PREFIX_DELEGATION: the count is /28 prefixes (`Ipv4PrefixCount`). */
  prefixDelegation: boolean;
  imds?: ImdsEniLister;
  imdsWaitMs: number;
  settleMs: number;
  now: () => number;
  /** Waits between polls (ms). */
  sleep: Sleep;
  /** ENIs this process works on now (the sweep skips them). */
  inFlight: Set<string>;
  /** Attached ENIs whose DeleteOnTermination could not be set yet. */
  needsDeleteOnTermination: Set<string>;
  /** The attached ENI now holds `deviceIndex` as pending (no longer a mere reservation). */
  attachedPending(eniId: string, deviceIndex: number): void;
  /** Where new ENIs go, and the exhausted marks. */
  placement: EniPlacement;
  /** A new ENI was created in `candidate`'s subnet (learn its CIDR, lower the cached free count). */
  placed(candidate: PlacementCandidate, eni: Ec2Eni): void;
  /** EC2 answered that `subnetId` is full (metrics). */
  onSubnetFull?: (subnetId: string) => void;
  /** Runs the "before usable" hook and puts the ENI into the datastore; undefined = left pending. */
  adopt(eni: Ec2Eni): Promise<EniInfo | undefined>;
}

/** The tags of a new ENI (docs/design.md#3-contracts): ADDITIONAL_ENI_TAGS, then ours (which win). */
export function newEniTags(
  c: Pick<EniCreateContext, 'additionalTags' | 'instance' | 'clusterName'>,
  createdAtMs: number,
): Record<string, string> {
  return {
    ...c.additionalTags,
    [TAG_INSTANCE_ID]: c.instance.instanceId,
    [TAG_CREATED_AT]: new Date(createdAtMs).toISOString().replace(/\.\d{3}Z$/, 'Z'),
    ...(c.clusterName ? { [TAG_CLUSTER_NAME]: c.clusterName } : {}),
  };
}

/**
 * CreateNetworkInterface in the first placement candidate that has room: a candidate
 * EC2 answers `InsufficientFreeAddressesInSubnet` / `InsufficientCidrBlocks` for is
 * marked exhausted and the next one is tried, in this same creation (failover, not a
 * stall). Only the last candidate gets a cut-down count (an ENI is scarcer than an
 * address: a roomier subnet gets the full count first). One `placement.plan()` per
 * creation (at most one DescribeSubnets, cached).
 * @returns the new ENI and the candidate it went to.
 * @throws PlacementError when no candidate may or can take it (the message lists the
 * exhausted subnets); Ec2Error for any other EC2 failure (not retried in another subnet).
 */
export async function createInPlacement(
  c: EniCreateContext,
  req: { description: string; tags: Record<string, string>; secondaryCount: number; prefixCount?: number },
): Promise<{ eni: Ec2Eni; candidate: PlacementCandidate }> {
  const plan = await c.placement.plan();
  if (!plan.ok) throw new PlacementError(plan.kind, plan.reason);
  try {
    return await createInCandidates(c, req, plan.candidates, plan.source);
  } finally {
    c.placement.release?.(plan.candidates[0]!.subnetId);
  }
}

/** {@link createInPlacement} over the planned candidates, in order. */
async function createInCandidates(
  c: EniCreateContext,
  req: { description: string; tags: Record<string, string>; secondaryCount: number; prefixCount?: number },
  candidates: PlacementCandidate[],
  source: string,
): Promise<{ eni: Ec2Eni; candidate: PlacementCandidate }> {
  const full: Array<{ subnetId: string; code: string }> = [];
  for (const [i, candidate] of candidates.entries()) {
    try {
      const eni = await createShrinking(c, req, candidate, i === candidates.length - 1);
      if (full.length)
        c.log.info({ subnetId: candidate.subnetId, exhausted: full, source }, 'ENI created in the next subnet');
      c.placed(candidate, eni);
      return { eni, candidate };
    } catch (e) {
      if (!(e instanceof Ec2Error) || !SUBNET_FULL_CODES.has(e.code)) throw e;
      c.placement.markExhausted(candidate.subnetId, e.code);
      c.onSubnetFull?.(candidate.subnetId);
      full.push({ subnetId: candidate.subnetId, code: e.code });
      c.log.warn({ subnetId: candidate.subnetId, code: e.code }, 'subnet full: trying the next candidate subnet');
    }
  }
  const after = await c.placement.plan();
  if (after.ok) c.placement.release?.(after.candidates[0]!.subnetId);
  throw new PlacementError(
    after.ok ? 'subnets_exhausted' : after.kind,
    after.ok ? exhaustedReason(full) : after.reason,
  );
}

/**
 * CreateNetworkInterface in `candidate`; with `shrink`, its secondary IP or prefix count
 * cut down while the subnet cannot fill it whole (assign-shrink.ts), down to 1.
 * @throws the refusal (of a count of 1 with `shrink`: the subnet is full), or any other error unchanged.
 */
async function createShrinking(
  c: EniCreateContext,
  req: { description: string; tags: Record<string, string>; secondaryCount: number; prefixCount?: number },
  candidate: PlacementCandidate,
  shrink: boolean,
): Promise<Ec2Eni> {
  const where = { subnetId: candidate.subnetId, securityGroupIds: candidate.securityGroupIds };
  if (!shrink) return c.ec2.createEni({ ...req, ...where });
  const prefixes = req.prefixCount !== undefined && req.prefixCount > 0;
  let eni: Ec2Eni | undefined;
  await assignShrinking(
    prefixes ? req.prefixCount! : req.secondaryCount,
    async (n) => {
      eni = await c.ec2.createEni({ ...req, ...where, ...(prefixes ? { prefixCount: n } : { secondaryCount: n }) });
    },
    (refused, next, code) =>
      c.log.info(
        { subnetId: candidate.subnetId, refused, next, code },
        'subnet short for the new ENI: asking for fewer',
      ),
  );
  return eni!;
}

/**
 * Creates a tagged ENI with `count` secondary IPs (with prefix delegation: /28
 * prefixes; capped at the per-ENI limit) where the placement says ({@link createInPlacement}), attaches it at
 * `deviceIndex` (reserved by the caller), sets DeleteOnTermination, waits for the
 * attachment and for IMDS to list it (up to `imdsWaitMs`), then adopts it. If IMDS is
 * still behind or the hook fails, the ENI stays pending (counted, not served from) and
 * the reconcile adopts it later. If the attach fails for sure, the new (unattached,
 * ours) ENI is deleted again; if its outcome is unknown, the ENI is left pending.
 * A failed DeleteOnTermination is not fatal: the reconcile sets it later.
 * @returns the new ENI's info, or undefined when it was left pending. @throws Ec2Error, PlacementError (see {@link createInPlacement})
 */
export async function createAndAttachEni(
  c: EniCreateContext,
  count: number,
  deviceIndex: number,
): Promise<EniInfo | undefined> {
  const { instance, log } = c;
  const n = Math.min(count, instance.ipsPerEni);
  const { eni, candidate } = await createInPlacement(c, {
    description: `${ENI_DESCRIPTION_PREFIX}${instance.instanceId}`,
    tags: newEniTags(c, c.now()),
    // With prefix delegation the count is /28 prefixes (one EC2 slot each, like a secondary IP).
    ...(c.prefixDelegation ? { secondaryCount: 0, prefixCount: n } : { secondaryCount: n }),
  });
  log.info(
    {
      eniId: eni.eniId,
      deviceIndex,
      subnetId: candidate.subnetId,
      securityGroupIds: candidate.securityGroupIds,
      secondaryIps: eni.secondaryIps.length,
      prefixes: eni.ipv4Prefixes.length,
    },
    'created ENI',
  );
  return attachOwnEni(c, eni, deviceIndex);
}

/**
 * Attaches an `available` ENI of ours (just created, or left unattached by a previous
 * ipamd: eni-settle.ts) at `deviceIndex` (reserved by the caller), sets
 * DeleteOnTermination, waits for the attachment and for IMDS to list it, then adopts it;
 * see {@link createAndAttachEni} for what happens when a step fails (a failed-for-sure
 * attach deletes the ENI: it is ours, unattached, and holds no pod's address).
 * @returns the ENI's info, or undefined when it was left pending. @throws Ec2Error
 */
export async function attachOwnEni(
  c: EniCreateContext,
  eni: Ec2Eni,
  deviceIndex: number,
): Promise<EniInfo | undefined> {
  const { ec2, instance, log } = c;
  c.inFlight.add(eni.eniId);
  try {
    let attachmentId: string;
    try {
      attachmentId = await ec2.attachEni(eni.eniId, instance.instanceId, deviceIndex);
    } catch (e) {
      if (!failedForSure(e)) {
        // The attach may have happened: keep the index; the reconcile adopts it or the sweep deletes it.
        c.attachedPending(eni.eniId, deviceIndex);
        throw e;
      }
      log.warn({ eniId: eni.eniId, err: (e as Error).message }, 'attach failed; deleting the new ENI');
      await ec2
        .deleteEni(eni.eniId)
        .catch((d: Error) =>
          log.error(
            { eniId: eni.eniId, err: d.message },
            'could not delete unattached ENI; the leaked-ENI sweep will retry',
          ),
        );
      throw e;
    }
    c.attachedPending(eni.eniId, deviceIndex);
    try {
      await ec2.setDeleteOnTermination(eni.eniId, attachmentId);
    } catch (e) {
      c.needsDeleteOnTermination.add(eni.eniId);
      log.warn(
        { eniId: eni.eniId, err: (e as Error).message },
        'could not set DeleteOnTermination; the reconcile retries',
      );
    }
    const settled = await waitForAttachment(ec2, eni.eniId, 'attached', c.settleMs, c.now, c.sleep);
    if (!(await waitForImds(c.imds, eni.eniId, c.imdsWaitMs, c.now, log, c.sleep))) {
      log.warn(
        { eniId: eni.eniId, waitedMs: c.imdsWaitMs },
        'IMDS does not list the new ENI yet; left pending for the reconcile',
      );
      return undefined;
    }
    const info = await c.adopt(settled);
    if (info)
      log.info(
        {
          eniId: eni.eniId,
          deviceIndex,
          attachmentId,
          ips: settled.secondaryIps.length,
          prefixes: settled.ipv4Prefixes.length,
        },
        'attached ENI',
      );
    return info;
  } finally {
    c.inFlight.delete(eni.eniId);
  }
}
