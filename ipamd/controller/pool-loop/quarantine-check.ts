/**
 * Lifts the quarantine of addresses (docs/design.md#13-evidence-before-trust item 4, Datastore.quarantine) once the
 * conflict that caused it is gone: the plugin refused an ADD because the node's main
 * table already routed `<ip>/32` to another pod's veth; when no such route is left (the
 * other pod was deleted: its route went with its veth) the address may be handed out
 * again. Read with one `ip -json -batch` process per pass in the node netns, and only
 * while something is quarantined (nothing runs otherwise). A read that fails lifts
 * nothing (never free on absence of evidence).
 */
import { ipShow } from '../../../netfacts/ip-query.js';
import type { Logger } from '../../log.js';
import { PeriodicTask } from '../periodic-task.js';

/** What the check needs of the datastore. */
export interface QuarantineStore {
  quarantined(): Array<{ ip: string }>;
  liftQuarantine(ip: string): boolean;
}

/**
 * Reads which of `ips` the node's main table still routes (`<ip>/32`, any device).
 * @returns the routed subset. @throws Error when the kernel cannot be read.
 */
export type RoutedReader = (ips: readonly string[]) => Promise<Set<string>>;

/** The default reader: `ip -json route show exact <ip>/32` per IP, one process, in `nodeNetns` (default the current netns). */
export function kernelRoutedReader(nodeNetns?: string): RoutedReader {
  return async (ips) => {
    const out = await ipShow(
      ips.map((ip) => `route show exact ${ip}/32`),
      nodeNetns,
    );
    return new Set(ips.filter((_, i) => out[i]!.length > 0));
  };
}

/** Options of {@link startQuarantineCheck}. */
export interface QuarantineCheckOptions {
  ds: QuarantineStore;
  log: Logger;
  /** Period of the check in ms (ipamd uses ENI_IPAM_GC_INTERVAL). */
  intervalMs: number;
  read: RoutedReader;
}

/**
 * One pass: lifts the quarantine of every address the node no longer routes.
 * @returns the lifted addresses ([] when nothing is quarantined or the read failed).
 */
export async function checkQuarantine(o: Omit<QuarantineCheckOptions, 'intervalMs'>): Promise<string[]> {
  const ips = o.ds.quarantined().map((q) => q.ip);
  if (ips.length === 0) return [];
  let routed: Set<string>;
  try {
    routed = await o.read(ips);
  } catch (e) {
    o.log.warn(
      { err: (e as Error).message, quarantined: ips },
      'cannot read host routes; quarantined IPs stay quarantined',
    );
    return [];
  }
  const lifted = ips.filter((ip) => !routed.has(ip) && o.ds.liftQuarantine(ip));
  if (lifted.length)
    o.log.info({ ips: lifted }, 'quarantine lifted: the node no longer routes these IPs to another pod');
  return lifted;
}

/** Runs {@link checkQuarantine} every `intervalMs` until `stop()` (which waits for a pass in progress). */
export function startQuarantineCheck(o: QuarantineCheckOptions): { stop(): Promise<void> } {
  const task = new PeriodicTask({ intervalMs: o.intervalMs, run: () => checkQuarantine(o) });
  task.start();
  return { stop: () => task.stop() };
}
