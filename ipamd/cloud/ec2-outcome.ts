/**
 * How to read an EC2 failure's outcome, for every caller of the EC2 port (ec2-port.ts): did the
 * request surely not happen (retry-free to re-plan), or may it have happened (settle by a
 * describe before trusting either outcome)? Pure.
 */
import { Ec2Error } from './ec2-port.js';
import { THROTTLE_CODES } from './retry.js';

/**
 * True when an EC2 failure proves the request was not executed (a 4xx answer or
 * throttling). False for server errors, timeouts and connection errors: the call may
 * have taken effect, so the caller must check EC2 before trusting either outcome.
 * False too for a call that was retried and then got a 4xx: an earlier attempt (a 5xx or
 * timeout) may have done it, and the 4xx may be its consequence (an Unassign repeated
 * after it happened: `InvalidParameterValue`, not assigned; a Detach repeated:
 * `InvalidAttachmentID.NotFound`). Only a describe settles those.
 */
export function failedForSure(e: unknown): boolean {
  if (!(e instanceof Ec2Error)) return false;
  if (e.attempts > 1) return false;
  const kind = (e as Ec2Error & { kind?: string }).kind;
  if (kind === 'client' || kind === 'throttle') return true;
  if (kind === 'server' || kind === 'transport') return false;
  if (THROTTLE_CODES.has(e.code)) return true; // refused before anything was done (EC2 answers 503)
  return e.httpStatus !== undefined && e.httpStatus >= 400 && e.httpStatus < 500;
}

/**
 * True when a failed UnassignPrivateIpAddresses proves the addresses (or /28 prefixes) are
 * all still on the ENI: the call was surely not executed ({@link failedForSure}) and EC2
 * did not refuse it because of the addresses themselves. `InvalidParameterValue` is what
 * EC2 answers when some of them are not assigned to the ENI (any more): the datastore is
 * behind EC2, and only a describe may say which ones are left.
 */
export function unassignRefusedKeepingAddresses(e: unknown): boolean {
  return failedForSure(e) && !(e instanceof Ec2Error && e.code === 'InvalidParameterValue');
}
