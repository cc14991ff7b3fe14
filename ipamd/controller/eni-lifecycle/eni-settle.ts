/**
 * At start, ipamd settles the ENIs it created for this node and never attached (ipamd
 * killed between CreateNetworkInterface and AttachNetworkInterface, e.g. OOM during a
 * scale-up), whatever the leaked-ENI sweep's schedule (docs/design.md#eni-ownership): each
 * is attached when the pool wants a new ENI now and it fits where new ENIs go, else
 * deleted. The sweep alone let a crash loop leak one ENI per kill: each restart re-draws
 * its first run (up to 5 min) and it is off while releases are frozen (all of a start,
 * when ipamd is killed before its first evidence pass ends).
 *
 * Which ENIs (all must hold; one DescribeNetworkInterfaces, every page, or no decision):
 * - status `available`, no attachment;
 * - tagged `node.k8s.amazonaws.com/instance_id=<this instance>`, described
 *   `aws-K8S-<this instance>` (what createAndAttachEni writes), not `no_manage=true`, in our VPC;
 * - with CLUSTER_NAME set, tagged `cluster.k8s.amazonaws.com/name=<it>` (as ipamd tags it);
 * - not in the datastore and no allocation (held or pending) on any of its addresses;
 * - not being worked on by this process.
 *
 * Why deleting such an ENI without waiting for the evidence is safe: an `available` ENI is
 * attached to no instance, so no packet reaches a pod through it, and ipamd serves an
 * address only once its ENI is attached and adopted; the checkpoint (which holds every
 * allocation ever acknowledged) names no pod on it. Without a checkpoint (the datastore
 * cannot say what pods hold: release gate source `checkpoint`) nothing is attached or
 * deleted here; the sweep decides once the evidence is read. DISABLE_LEAKED_ENI_CLEANUP
 * keeps the ENIs no one wants (attaching a wanted one is still done).
 */
import ipaddr from 'ipaddr.js';
import { Ec2Error, type Ec2Eni, type Ec2Port } from '../../cloud/ec2-port.js';
import type { Allocation, EniInfo } from '../../datastore/types.js';
import type { Logger } from '../../log.js';
import type { ReleaseGate } from '../release/release-gate.js';
import { ENI_DESCRIPTION_PREFIX, isOurEni, TAG_CLUSTER_NAME, TAG_INSTANCE_ID } from './eni-ownership.js';
import type { EniPlacement } from './placement-types.js';

/** What {@link whyNotLeftover} judges an ENI against. */
export interface LeftoverScope {
  instanceId: string;
  vpcId: string;
  /** CLUSTER_NAME, when set: the cluster tag must name it. */
  clusterName?: string;
  /** The datastore's ENI, if it knows this one. */
  known: (eniId: string) => EniInfo | undefined;
  /** Every allocation the datastore holds, served and pending. */
  allocations: readonly Allocation[];
  isBusy: (eniId: string) => boolean;
}

/**
 * Whether `eni` is an ENI of ours, for this node, left available with no pod on it (the
 * module docstring's list). Pure. @returns undefined when it may be settled, else why not.
 */
export function whyNotLeftover(eni: Ec2Eni, s: LeftoverScope): string | undefined {
  if (eni.status !== 'available' || eni.attachment) return `status ${eni.status}`;
  if (!isOurEni(eni, s.instanceId) || eni.description !== `${ENI_DESCRIPTION_PREFIX}${s.instanceId}`)
    return 'not created by eni-ipam for this instance (or no_manage=true)';
  if (eni.vpcId && eni.vpcId !== s.vpcId) return 'another VPC';
  if (s.clusterName && eni.tags[TAG_CLUSTER_NAME] !== s.clusterName) return 'not tagged for this cluster';
  if (s.known(eni.eniId)) return 'in the datastore (the ENI reconcile handles it)';
  if (s.isBusy(eni.eniId)) return 'in use by this ipamd';
  const prefixes = eni.ipv4Prefixes.map((p) => ipaddr.IPv4.parseCIDR(p));
  const onIt = (ip: string) =>
    eni.secondaryIps.includes(ip) ||
    eni.primaryIp === ip ||
    (ipaddr.IPv4.isValidFourPartDecimal(ip) && prefixes.some((p) => ipaddr.IPv4.parse(ip).match(p)));
  const held = s.allocations.filter((a) => a.eniId === eni.eniId || onIt(a.ipv4));
  if (held.length) return `the checkpoint has pods on its addresses (${held.map((a) => a.ipv4).join(', ')})`;
  return undefined;
}

/** Options of {@link settleLeftoverEnis}. */
export interface SettleOptions {
  ec2: Ec2Port;
  log: Logger;
  gate: ReleaseGate;
  scope: Omit<LeftoverScope, 'allocations'> & { allocations: () => readonly Allocation[] };
  /** Where new ENIs go now (a leftover is attached only into a candidate subnet, with its security groups). */
  placement: EniPlacement;
  /** The pool: the decision runs while no step runs; a wanted leftover is attached as a creation. */
  pool: {
    exclusive<T>(fn: () => Promise<T>): Promise<T>;
    attachLeftoverIfWanted(eni: Ec2Eni, subnetCidr: string): boolean;
  };
  /** False with DISABLE_LEAKED_ENI_CLEANUP: unwanted leftovers are kept. */
  deleteUnwanted: boolean;
}

/** What one settle did. */
export interface SettleReport {
  attached: string[];
  deleted: string[];
  kept: Array<{ eniId: string; why: string }>;
  failed: Array<{ eniId: string; error: string }>;
  /** Why nothing was looked at (no checkpoint, describe failed). */
  skipped?: string;
}

const sameSet = (a: readonly string[], b: readonly string[]) =>
  a.length === b.length && [...a].sort().join() === [...b].sort().join();

/**
 * Settles this node's leftover ENIs once (see the module docstring). Never throws.
 * Attaches run in the background (the pool's creations); deletes are awaited.
 */
export async function settleLeftoverEnis(o: SettleOptions): Promise<SettleReport> {
  const r: SettleReport = { attached: [], deleted: [], kept: [], failed: [] };
  if (o.gate.holds('checkpoint')) {
    r.skipped = 'no checkpoint: what pods hold is not known; the leaked-ENI sweep decides once the evidence is read';
    return r;
  }
  let found: Ec2Eni[];
  try {
    found = await o.ec2.describeEnisByFilters({
      status: ['available'],
      'vpc-id': [o.scope.vpcId],
      [`tag:${TAG_INSTANCE_ID}`]: [o.scope.instanceId],
    });
  } catch (e) {
    r.skipped = `describe failed: ${(e as Error).message}`;
    o.log.warn({ err: r.skipped }, 'leftover ENIs not settled at start: the leaked-ENI sweep will');
    return r;
  }
  const unwanted = await o.pool.exclusive(() => decide(o, found, r));
  for (const eni of unwanted) {
    if (!o.deleteUnwanted) {
      r.kept.push({ eniId: eni.eniId, why: 'not wanted, and DISABLE_LEAKED_ENI_CLEANUP=true' });
      continue;
    }
    try {
      await o.ec2.deleteEni(eni.eniId);
      r.deleted.push(eni.eniId);
    } catch (e) {
      if (e instanceof Ec2Error && e.code === 'InvalidNetworkInterfaceID.NotFound') r.deleted.push(eni.eniId);
      else r.failed.push({ eniId: eni.eniId, error: (e as Error).message });
    }
  }
  if (found.length) logReport(o.log, r);
  return r;
}

/** Under the pool's exclusive: attaches each wanted leftover that fits; @returns the unwanted ones. */
async function decide(o: SettleOptions, found: Ec2Eni[], r: SettleReport): Promise<Ec2Eni[]> {
  const allocations = o.scope.allocations();
  const leftovers: Ec2Eni[] = [];
  for (const eni of found) {
    const why = whyNotLeftover(eni, { ...o.scope, allocations });
    if (why) r.kept.push({ eniId: eni.eniId, why });
    else leftovers.push(eni);
  }
  if (!leftovers.length) return [];
  const plan = await o.placement.plan();
  if (plan.ok) o.placement.release?.(plan.candidates[0]!.subnetId);
  const unwanted: Ec2Eni[] = [];
  for (const eni of leftovers) {
    const fits = plan.ok
      ? plan.candidates.find(
          // No security group named: EC2 gave the ENI its VPC's default, as it would a new one.
          (c) =>
            c.subnetId === eni.subnetId &&
            (c.securityGroupIds.length === 0 || sameSet(c.securityGroupIds, eni.securityGroupIds)),
        )
      : undefined;
    if (fits && o.pool.attachLeftoverIfWanted(eni, fits.cidr)) r.attached.push(eni.eniId);
    else unwanted.push(eni);
  }
  return unwanted;
}

function logReport(log: Logger, r: SettleReport): void {
  const settled = r.attached.length + r.deleted.length;
  (settled || r.failed.length ? log.info.bind(log) : log.debug.bind(log))(
    { attached: r.attached, deleted: r.deleted, failed: r.failed, kept: r.kept },
    'settled the ENIs a previous ipamd created for this node and never attached',
  );
}
