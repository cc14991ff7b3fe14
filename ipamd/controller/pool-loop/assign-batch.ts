/**
 * One AssignPrivateIpAddresses batch of a grow pass on an existing ENI (grow-executor.ts):
 * secondary IPs, or /28 prefixes (16 addresses each) with prefix delegation, cut down while
 * the subnet cannot fill it whole (eni-lifecycle/assign-shrink.ts). After a failure of
 * unknown outcome (5xx, timeout), what EC2 then shows on the ENI is settled into the
 * datastore before the error is passed on.
 */
import type { Ec2Port } from '../../cloud/ec2-port.js';
import { failedForSure } from '../../cloud/ec2-outcome.js';
import type { EniInventory } from '../../datastore/roles.js';
import type { Logger } from '../../log.js';
import type { AllocationUnit } from '../../pool/index.js';
import { assignShrinking } from '../eni-lifecycle/assign-shrink.js';

/** What a batch needs: the datastore's ENI inventory, the EC2 port, the log. */
export interface AssignBatchDeps {
  ds: EniInventory;
  ec2: Ec2Port;
  log: Logger;
}

/**
 * Assigns `count` slots (`unit`: secondary IPs or /28 prefixes) on `eniId` and adds what
 * EC2 assigned to the datastore.
 * @throws the EC2 error (an Ec2Error), after settling an unknown outcome.
 */
export async function assignBatch(
  d: AssignBatchDeps,
  unit: AllocationUnit,
  eniId: string,
  count: number,
): Promise<void> {
  try {
    await assignShrinking(
      count,
      (n) => assignOnce(d, unit, eniId, n),
      (refused, next, code) => d.log.info({ eniId, refused, next, code }, 'subnet short: asking for fewer'),
    );
  } catch (e) {
    if (!failedForSure(e)) await settleAssign(d, eniId);
    throw e;
  }
}

async function assignOnce(d: AssignBatchDeps, unit: AllocationUnit, eniId: string, count: number): Promise<void> {
  if (unit === 'prefix') {
    const prefixes = await d.ec2.assignPrefixes(eniId, count);
    d.ds.addPrefixes(eniId, prefixes);
    d.log.info({ eniId, prefixes }, 'assigned /28 prefixes');
  } else {
    const ips = await d.ec2.assignIps(eniId, count);
    d.ds.addIps(eniId, ips);
    d.log.info({ eniId, count: ips.length }, 'assigned secondary IPs');
  }
}

/**
 * After an assign of unknown outcome EC2 is asked what the ENI holds: addresses it shows
 * that the datastore lacks are added (EC2 is the truth), so the next plan neither asks for
 * them again nor runs into the ENI's limit. A failed describe decides nothing (the
 * reconcile catches up). Never throws.
 */
async function settleAssign(d: AssignBatchDeps, eniId: string): Promise<void> {
  const { ds, ec2, log } = d;
  try {
    const [eni] = await ec2.describeEnis([eniId]);
    if (!eni || !ds.getEni(eniId)) return;
    const haveIps = new Set(ds.eniIps(eniId));
    const havePrefixes = new Set(ds.eniPrefixes(eniId));
    const ips = eni.secondaryIps.filter((ip) => !haveIps.has(ip));
    const prefixes = eni.ipv4Prefixes.filter((p) => !havePrefixes.has(p));
    if (ips.length) ds.addIps(eniId, ips);
    if (prefixes.length) ds.addPrefixes(eniId, prefixes);
    if (ips.length + prefixes.length)
      log.info({ eniId, ips, prefixes }, 'assign of unknown outcome had happened: added what EC2 shows');
  } catch (e) {
    log.info(
      { eniId, err: (e as Error).message },
      'cannot settle an assign of unknown outcome yet; the reconcile will',
    );
  }
}
