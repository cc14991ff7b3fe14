/**
 * Keeps the node's host networking (DESIGN §7) in step with the ENIs in the datastore:
 * node-wide rules, sysctls and SNAT once at start, then per secondary ENI its link,
 * route table and rule as ENIs appear, and their removal as ENIs leave. Every step of
 * {@link HostNetwork} is idempotent, so a restart simply re-applies everything.
 */
import type { Datastore } from '../datastore/datastore.js';
import type { EniInfo } from '../datastore/types.js';
import type { Logger } from '../log.js';
import { HostNetwork } from '../network/host-network.js';

/** Options of {@link startHostNetworkSync}. */
export interface HostNetworkSyncOptions {
  ds: Datastore;
  log: Logger;
  primaryMac: string;
  nodeIp: string;
  vpcCidrs: string[];
  eniMtu: number;
  externalSnat: boolean;
  excludeSnatCidrs: string[];
  /** How often to look for ENIs added or removed (ms). */
  intervalMs: number;
}

/**
 * Applies the node setup and every known ENI (throws if that fails: ipamd must not serve
 * pods it cannot route), then follows ENI changes in the background.
 * @returns `sync()` to run a pass now (after a pool step) and `stop()`.
 */
export async function startHostNetworkSync(o: HostNetworkSyncOptions): Promise<{ sync(): Promise<void>; stop(): void }> {
  const hn = new HostNetwork({ eniMtu: o.eniMtu, externalSnat: o.externalSnat, excludeSnatCidrs: o.excludeSnatCidrs, log: o.log });
  await hn.setupNode({ primaryMac: o.primaryMac, nodeIp: o.nodeIp, vpcCidrs: o.vpcCidrs });
  const applied = new Map<string, EniInfo>();
  let running: Promise<void> | undefined;
  const pass = async () => {
    const now = new Map(o.ds.listEnis().filter((e) => !e.isPrimary).map((e) => [e.eniId, e]));
    for (const [id, eni] of now) {
      if (applied.has(id)) continue;
      await hn.setupEni(eni);
      applied.set(id, eni);
      o.log.info({ eniId: id, deviceNumber: eni.deviceNumber, table: eni.deviceNumber + 1 }, 'host networking set up for ENI');
    }
    for (const [id, eni] of applied) {
      if (now.has(id)) continue;
      await hn.teardownEni(eni);
      applied.delete(id);
      o.log.info({ eniId: id }, 'host networking removed for freed ENI');
    }
  };
  const sync = () => (running ??= pass().catch((e: Error) => o.log.error({ err: e.message }, 'host networking sync failed; retrying')).finally(() => { running = undefined; }));
  for (const eni of o.ds.listEnis()) if (!eni.isPrimary) { await hn.setupEni(eni); applied.set(eni.eniId, eni); }
  const timer = setInterval(() => void sync(), o.intervalMs);
  timer.unref();
  return { sync, stop: () => clearInterval(timer) };
}
