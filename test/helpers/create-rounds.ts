/**
 * How many ENI creation rounds a node spent against a full subnet: ipamd asks for fewer
 * secondary IPs down to 1 when EC2 refuses a CreateNetworkInterface batch whole
 * (eni-lifecycle/assign-shrink.ts), so each round ends with a refused count of 1, and
 * grow then pauses creations. Read from the simulated cloud's call log.
 */
import type { ApiCallRecord } from '../../sim/index.js';

/** Creation rounds and calls in `calls`: rounds = refused creations asking for 1 secondary IP. */
export function createRounds(calls: readonly ApiCallRecord[]): { rounds: number; calls: number } {
  const creates = calls.filter((c) => c.action === 'CreateNetworkInterface');
  const rounds = creates.filter((c) => c.errorCode && c.params.SecondaryPrivateIpAddressCount === '1').length;
  return { rounds, calls: creates.length };
}
