/**
 * CNI STATUS on ipamd's side (CNI spec 1.1.0, "STATUS"): can an ADD get an IPv4 address
 * now? Yes when one is available, when the pool controller can still grow, or when a
 * cooling address frees within the bounded ADD wait. Changes nothing, calls no API.
 *
 * When it cannot, the answer is code 50 ("not available, i.e. cannot service ADD
 * requests"), not 51: an empty pool that cannot grow stops new pods only; the pods
 * that hold addresses keep their routes and their connectivity.
 */
import type { PoolCounts } from '../datastore/roles.js';
import { IpamStatusCode } from '../../proto/ipam.js';

/** The answer: `code` 0 when `canServe`, else 50 (no ADD can be served now). */
export interface IpamStatus {
  canServe: boolean;
  code: number;
  /** Why, in operator terms (counts, the blocked reason). */
  message: string;
}

/** What {@link ipamStatus} reads. */
export interface StatusDeps {
  ds: PoolCounts;
  /** The pool controller's `growBlockedReason()`: undefined when it can add an address. */
  growBlockedReason: () => string | undefined;
  /** Bounded wait of an ADD on an empty pool (ms): a cooling IP freeing sooner counts. */
  addWaitTimeoutMs: number;
  now: () => number;
}

/** Computes the STATUS answer from the datastore and the pool controller. */
export function ipamStatus(d: StatusDeps): IpamStatus {
  const now = d.now();
  const c = d.ds.counts(now);
  if (c.available > 0) return { canServe: true, code: IpamStatusCode.Ok, message: `${c.available} IPs available` };
  const blocked = d.growBlockedReason();
  if (blocked === undefined)
    return { canServe: true, code: IpamStatusCode.Ok, message: 'no IP available now; the pool can grow' };
  const coolEnd = d.ds.nextCooldownEnd(now);
  if (coolEnd !== undefined && coolEnd - now <= d.addWaitTimeoutMs) {
    return {
      canServe: true,
      code: IpamStatusCode.Ok,
      message: `no IP available now; a cooling IP is free in ${Math.max(0, Math.ceil(coolEnd - now))} ms`,
    };
  }
  return {
    canServe: false,
    code: IpamStatusCode.NotAvailable,
    message: `no IP can be had now (${c.assigned} assigned, ${c.cooling} cooling, ${c.unverified} unverified of ${c.total}) and the pool cannot grow: ${blocked}`,
  };
}
