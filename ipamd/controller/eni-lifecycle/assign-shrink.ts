/**
 * A batch the subnet cannot fill whole is cut down, not given up (the assigns of
 * pool-loop/grow-executor.ts, the creations of eni-create.ts). EC2 refuses an
 * AssignPrivateIpAddresses or CreateNetworkInterface batch as a whole when the subnet has
 * fewer free addresses (`InsufficientFreeAddressesInSubnet`) or fewer free aligned /28
 * blocks (`InsufficientCidrBlocks`) than it asks for, even when it could fill part of it
 * (EC2 API reference: `SecondaryPrivateIpAddressCount`, `Ipv4PrefixCount`). A pass that
 * asked for two slots while a nearly full subnet had one left would otherwise fail a
 * waiting ADD "subnet full" beside an address EC2 would have given.
 */
import { Ec2Error } from '../../cloud/ec2-port.js';
import { failedForSure } from '../../cloud/ec2-outcome.js';
import { SUBNET_FULL_CODES } from './subnet-placement.js';

/**
 * A refusal EC2 gives when the subnet cannot fill the whole batch, known to have assigned
 * nothing (a retried call whose earlier attempt may have acted is left to the caller's
 * unknown-outcome handling, never asked again smaller on top).
 */
function subnetShort(e: unknown): e is Ec2Error {
  return e instanceof Ec2Error && SUBNET_FULL_CODES.has(e.code) && failedForSure(e);
}

/**
 * Runs `attempt(count)`; while EC2 refuses it because the subnet is short, tries again
 * with half the count (rounded down), down to 1. At most ⌈log2 count⌉ extra calls, each
 * of which EC2 refused without acting (a subnet-full answer is a 4xx: nothing assigned).
 * @param count slots wanted (secondary IPs or /28 prefixes), at least 1.
 * @param onShort told of each cut: the count refused, the next count tried, EC2's code.
 * @returns the count EC2 assigned.
 * @throws the refusal of a batch of 1 (the subnet is full), or any other error unchanged.
 */
export async function assignShrinking(
  count: number,
  attempt: (count: number) => Promise<void>,
  onShort?: (refused: number, next: number, code: string) => void,
): Promise<number> {
  for (let n = count; ; n = Math.floor(n / 2)) {
    try {
      await attempt(n);
      return n;
    } catch (e) {
      if (n <= 1 || !subnetShort(e)) throw e;
      onShort?.(n, Math.floor(n / 2), e.code);
    }
  }
}
