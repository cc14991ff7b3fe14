/**
 * Why ipamd failed a request, carried from ipamd to the CNI plugin in the gRPC status
 * details as a leading tag (`[checkpoint] could not persist …`), so the plugin can
 * answer the runtime with the CNI error that means what happened
 * (cni-plugin/error-catalogue.ts; the table in docs/design.md#cni-errors). Shared by both
 * ends of the plugin↔ipamd seam; no I/O.
 */

/** The causes ipamd tags its failures with. */
export const IpamdCause = {
  /** The checkpoint write failed (disk full, read-only or failing disk); the change was undone. */
  Checkpoint: 'checkpoint',
  /** ipamd is shutting down or restarting; nothing was done. */
  ShuttingDown: 'shutting-down',
  /** No free address while addresses are held unverified (checkpoint rejected or missing, evidence unread). */
  Unverified: 'unverified',
  /** No free address while EC2 throttles ipamd's calls (RequestLimitExceeded). */
  Throttled: 'throttled',
  /** The address restored for this container is not yet visible on an ENI. */
  NotReady: 'not-ready',
} as const;

/** One of {@link IpamdCause}. */
export type IpamdCauseName = (typeof IpamdCause)[keyof typeof IpamdCause];

const NAMES = new Set<string>(Object.values(IpamdCause));
const TAG = /^\[([a-z-]+)\] /;

/** `message` tagged with `cause`: `[cause] message`. */
export function tagCause(cause: IpamdCauseName, message: string): string {
  return `[${cause}] ${message}`;
}

/**
 * Splits gRPC details into the cause tag (undefined when there is none or it is not one of
 * {@link IpamdCause}, e.g. an older ipamd) and the message without the tag.
 */
export function splitCause(details: string): { cause?: IpamdCauseName; message: string } {
  const m = TAG.exec(details);
  if (!m || !NAMES.has(m[1]!)) return { message: details };
  return { cause: m[1] as IpamdCauseName, message: details.slice(m[0].length) };
}
