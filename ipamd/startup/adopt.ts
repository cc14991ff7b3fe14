/**
 * Start-up adoption of half-done ENI work (docs/design.md#10-the-warm-pool-at-depth item 4, crash-safety). A crash of
 * ipamd between any two EC2 steps leaves one of these, which the next start resolves:
 *
 * | left by a crash between…            | EC2 shows (ours)                    | start-up does |
 * |---|---|---|
 * | Create and Attach                   | `available`, not attached           | nothing here: the leaked-ENI sweep deletes it (≥ 5 min old) |
 * | Attach and attachment settled       | attachment `attaching`              | pending: the reconcile adopts it once `attached` and listed by IMDS |
 * | Attach and DeleteOnTermination      | `attached`, DeleteOnTermination off | adopted (served from), DeleteOnTermination set by the reconcile |
 * | Attach/modify and datastore update  | `attached`, not in the checkpoint   | adopted: its secondary IPs are free (no ADD could have got them) |
 * | Unassign and datastore update       | the IP gone from the ENI            | nothing: IPs come from EC2, never from IMDS or the checkpoint |
 * | Detach and Delete                   | `detaching` or `available`          | orphan: never served from; deleted once `available` |
 *
 * An attached ENI of ours that IMDS does not list yet (IMDS lag) is pending too: its
 * IPs are not handed out before IMDS shows it (docs/design.md#4-restore-after-restart rule 4); allocations restored
 * for its IPs stay `pending` in the datastore (kept, never released) until it is adopted.
 */
import type { Ec2Eni } from '../cloud/ec2.js';
import { isOurEni } from '../controller/eni-lifecycle/eni-ownership.js';
import type { EniManager } from '../controller/eni-lifecycle/eni-manager.js';
import type { Logger } from '../log.js';
import type { NodeInventory } from './discover.js';

/** How the managed ENIs found at start are treated. */
export interface AdoptionPlan {
  /** Primary ENI and ours attached + listed by IMDS: loaded into the datastore now. */
  load: Ec2Eni[];
  /** Ours, attached or attaching, not served from yet (attaching, or IMDS does not list it). */
  pending: Ec2Eni[];
  /** Ours, detaching: to be deleted once `available`. */
  detaching: Ec2Eni[];
  /** Ours, attached, DeleteOnTermination off: to be fixed. */
  fixDeleteOnTermination: Ec2Eni[];
}

/**
 * Sorts the inventory's managed ENIs by what start-up must do with them. Pure.
 * @param inv discovery result (EC2 is the truth for `managed`; `imdsEnis` is the hint).
 */
export function planAdoption(inv: Pick<NodeInventory, 'managed' | 'imdsEnis' | 'instance'>): AdoptionPlan {
  const plan: AdoptionPlan = { load: [], pending: [], detaching: [], fixDeleteOnTermination: [] };
  const inImds = new Set(inv.imdsEnis.map((e) => e.eniId));
  for (const eni of inv.managed) {
    const a = eni.attachment;
    if (a?.deviceIndex === 0) {
      plan.load.push(eni);
      continue;
    }
    if (!isOurEni(eni, inv.instance.instanceId)) continue;
    if (a?.status === 'detaching') plan.detaching.push(eni);
    else if (a?.status === 'attached' && inImds.has(eni.eniId)) plan.load.push(eni);
    else plan.pending.push(eni);
    if (a && a.status !== 'detaching' && !a.deleteOnTermination) plan.fixDeleteOnTermination.push(eni);
  }
  return plan;
}

/**
 * Hands the non-loaded ENIs of a plan to the ENI manager (pending / orphan, keeping
 * their device indexes) and queues the DeleteOnTermination fixes for the reconcile.
 */
export function registerAdoption(plan: AdoptionPlan, enis: EniManager, log: Logger): void {
  for (const e of plan.pending) enis.markPending(e.eniId, e.attachment?.deviceIndex ?? -1);
  for (const e of plan.detaching) enis.markOrphan(e.eniId, e.attachment?.deviceIndex ?? -1);
  for (const e of plan.fixDeleteOnTermination) enis.needsDeleteOnTermination.add(e.eniId);
  if (plan.pending.length + plan.detaching.length + plan.fixDeleteOnTermination.length > 0) {
    log.warn(
      {
        pending: plan.pending.map((e) => `${e.eniId} (${e.attachment?.status ?? 'unattached'})`),
        detaching: plan.detaching.map((e) => e.eniId),
        deleteOnTerminationOff: plan.fixDeleteOnTermination.map((e) => e.eniId),
      },
      'half-done ENI work found at start (crash or IMDS lag); the reconcile finishes it',
    );
  }
}
