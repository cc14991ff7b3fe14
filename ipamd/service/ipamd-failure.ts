/**
 * Failures of the request path that carry their cause to the CNI plugin
 * (proto/ipamd-cause.ts), so the runtime is answered with what happened and told to retry
 * when a retry helps (docs/design.md#cni-errors). Pure: no I/O.
 */
import { IpamdCause, tagCause, type IpamdCauseName } from '../../proto/ipamd-cause.js';
import type { DatastoreCounts } from '../datastore/types.js';

/**
 * A request failed for a cause a later retry can cure; the gRPC layer answers UNAVAILABLE
 * (or RESOURCE_EXHAUSTED when `noAddress`) with `details` = `[cause] message`.
 */
export class IpamdFailure extends Error {
  constructor(
    readonly ipamdCause: IpamdCauseName,
    message: string,
    /** True when the request failed for want of an address (metrics, gRPC RESOURCE_EXHAUSTED). */
    readonly noAddress = false,
  ) {
    super(message);
    this.name = 'IpamdFailure';
  }

  /** The gRPC details: the message tagged with the cause. */
  get details(): string {
    return tagCause(this.ipamdCause, this.message);
  }
}

/** What {@link explainNoAddress} looks at when an ADD got no address. */
export interface NoAddressContext {
  /** The metric reason the pool controller gave (`addFailureReason`). */
  reason: string;
  /** The datastore's counts now. */
  counts: Pick<DatastoreCounts, 'unverified' | 'releasing'>;
  /** Why releases are frozen (`ReleaseGate.describe()`), empty when open. */
  freezeReasons: readonly string[];
  /** True while ipamd is stopping. */
  stopping: boolean;
  /** True when EC2 throttled ipamd during the wait (a grow may still be retrying through it). */
  throttled?: boolean;
}

/**
 * The failure to answer for an ADD that got no address (`err`, a PoolExhaustedError), with
 * its cause: ipamd stopping → shutting-down; addresses held unverified → unverified, saying
 * how many, why and to run `eni-ipam audit` (a rejected checkpoint used to surface as "pool
 * cannot grow: ENI limit"); EC2 throttling → throttled; otherwise `err` unchanged.
 */
export function explainNoAddress(err: Error, c: NoAddressContext): Error {
  if (c.stopping) return new IpamdFailure(IpamdCause.ShuttingDown, err.message, true);
  if (c.counts.unverified > 0) {
    const why = c.freezeReasons.length ? c.freezeReasons.join('; ') : 'no evidence source has vouched for them yet';
    return new IpamdFailure(
      IpamdCause.Unverified,
      `${c.counts.unverified} addresses on this node's ENIs are held unverified (${why}); they are handed out once every evidence source (runtime, Kubernetes, kernel) has been read. Run \`eni-ipam audit\` on the node to see which source is missing or which checkpoint was rejected. Pool: ${err.message}`,
      true,
    );
  }
  if (c.reason === 'throttled' || c.throttled) return new IpamdFailure(IpamdCause.Throttled, err.message, true);
  return err;
}
