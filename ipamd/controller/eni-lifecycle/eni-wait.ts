/**
 * Polling waits of the ENI lifecycle: until EC2 reports an attachment settled, and until
 * IMDS (a hint that the OS sees the interface) lists a new ENI. Back-off from 100 ms
 * doubling to 2 s; every EC2 poll goes through the {@link Ec2Port} (in ipamd: Ec2Api and its token bucket).
 */
import { setTimeout as timerSleep } from 'node:timers/promises';
import { Ec2Error, type Ec2Port, type Ec2Eni } from '../../cloud/ec2-port.js';
import type { ImdsEniAddresses } from '../../cloud/imds.js';
import type { Logger } from '../../log.js';

/** Lists the ENIs IMDS shows, with their addresses (ImdsClient satisfies it). */
export interface ImdsEniLister {
  eniAddresses(): Promise<ImdsEniAddresses[]>;
}

/** Waits `ms` (the default: a timer; tests pass one that advances a virtual clock). */
export type Sleep = (ms: number) => Promise<void>;

/** The default {@link Sleep}: a real timer. */
export const realSleep: Sleep = (ms) => timerSleep(ms);

/**
 * Polls DescribeNetworkInterfaces until the ENI is `attached` (want `attached`) or
 * `available` with no live attachment (want `detached`), sleeping with `sleep` between polls.
 * @returns the ENI as EC2 describes it then.
 * @throws Ec2Error `InvalidNetworkInterfaceID.NotFound` if it vanished, `Timeout` after `timeoutMs`, or the describe's own error.
 */
export async function waitForAttachment(
  ec2: Ec2Port,
  eniId: string,
  want: 'attached' | 'detached',
  timeoutMs: number,
  now: () => number,
  sleep: Sleep = realSleep,
): Promise<Ec2Eni> {
  const deadline = now() + timeoutMs;
  let delay = 100;
  for (;;) {
    const [eni] = await ec2.describeEnis([eniId]);
    if (!eni)
      throw new Ec2Error('DescribeNetworkInterfaces', 'InvalidNetworkInterfaceID.NotFound', `${eniId} vanished`);
    if (want === 'attached' && eni.attachment?.status === 'attached') return eni;
    if (want === 'detached' && eni.status === 'available' && (!eni.attachment || eni.attachment.status === 'detached'))
      return eni;
    if (now() > deadline)
      throw new Ec2Error('DescribeNetworkInterfaces', 'Timeout', `${eniId} not ${want} after ${timeoutMs} ms`);
    await sleep(delay);
    delay = Math.min(delay * 2, 2000);
  }
}

/**
 * Polls IMDS until it lists `eniId`. IMDS read errors are logged (debug) and retried.
 * @returns true once listed, false after `timeoutMs`; true at once without an IMDS lister.
 */
export async function waitForImds(
  imds: ImdsEniLister | undefined,
  eniId: string,
  timeoutMs: number,
  now: () => number,
  log: Logger,
  sleep: Sleep = realSleep,
): Promise<boolean> {
  if (!imds) return true;
  const deadline = now() + timeoutMs;
  let delay = 100;
  for (;;) {
    try {
      if ((await imds.eniAddresses()).some((e) => e.eniId === eniId)) return true;
    } catch (e) {
      log.debug({ eniId, err: (e as Error).message }, 'IMDS read failed while waiting for a new ENI');
    }
    if (now() + delay > deadline) return false;
    await sleep(delay);
    delay = Math.min(delay * 2, 2000);
  }
}
