/**
 * Keeps the node's host networking (docs/design.md#7-host-networking) in step with the ENIs in the datastore:
 * node-wide rules and SNAT at start and again when the VPC's CIDR blocks change (sysctls checked at start and
 * every minute, not set), then per secondary ENI (in whatever subnet) its link,
 * route table and rule, and their removal as ENIs leave. Every step of
 * {@link HostNetwork} is idempotent, so a restart simply re-applies everything.
 *
 * A new ENI is set up through `setupEni`, which the ENI manager calls (its
 * `beforeEniUsable` hook) before the ENI's IPs enter the datastore: no pod gets an IP
 * whose ENI has no route table or rule yet. The periodic pass stays as the safety net
 * for ENIs that entered the datastore another way, and for removals.
 */
import type { DatastoreViews } from '../datastore/roles.js';
import type { EniInfo } from '../datastore/types.js';
import type { Logger } from '../log.js';
import { HostNetwork, type HostNetworkOptions } from '../network/host-network.js';
import type { SysctlCheck } from '../network/sysctl.js';
import { PeriodicTask } from './periodic-task.js';
import { eniRouteTable } from '../../netfacts/routing.js';

/** How often the node sysctls are read again (ms), so a fix (or a regression) shows without a restart. */
export const SYSCTL_RECHECK_MS = 60_000;

/** Options of {@link startHostNetworkSync}. */
export interface HostNetworkSyncOptions {
  ds: DatastoreViews;
  log: Logger;
  primaryMac: string;
  nodeIp: string;
  vpcCidrs: string[];
  eniMtu: number;
  externalSnat: boolean;
  excludeSnatCidrs: string[];
  /** NodePort support and SNAT port selection (HostNetworkOptions of the same names). */
  traffic?: Pick<HostNetworkOptions, 'randomizeSnat' | 'nodePortSupport' | 'connmark' | 'vethPrefix'>;
  /** How often to look for ENIs added or removed (ms). */
  intervalMs: number;
  /**
   * Re-reads the VPC's IPv4 CIDR blocks (IMDS `vpc-ipv4-cidr-blocks`) every `intervalMs`;
   * a changed, non-empty list rewrites the node rules and SNAT chain, then `onChange` is
   * told. A list that drops a block is applied only when two reads in a row agree. A
   * failed or empty read changes nothing. Omit: the list is read only at start.
   */
  vpcCidrRecheck?: { read: () => Promise<string[]>; intervalMs: number; onChange?: (cidrs: string[]) => void };
  /** Network namespace (path) standing for the node (ENI_IPAM_CNI_EXEC_NETNS, tests and demos); unset: ipamd's own. */
  netns?: string;
}

/**
 * Applies the node setup and every known ENI (throws if that fails: ipamd must not serve
 * pods it cannot route), then follows ENI changes in the background.
 * @returns `sync()` to run a pass now, `setupEni(eni)` to set one ENI up now (throws if
 *          that fails; idempotent), and `stop()`.
 */
export async function startHostNetworkSync(o: HostNetworkSyncOptions): Promise<{
  sync(): Promise<void>;
  setupEni(eni: EniInfo): Promise<void>;
  stop(): void;
  sysctls(): SysctlCheck[];
  /** The VPC CIDRs the node rules and SNAT chain now hold. */
  vpcCidrs(): string[];
  /** Re-reads the VPC CIDR blocks now (see `vpcCidrRecheck`); never rejects. */
  recheckVpcCidrs(): Promise<void>;
  /** Connection-mark reconciles so far, by result (`awscni_connmark_reconcile_total`). */
  connmarkReconciles(): { success: number; error: number };
}> {
  const connmarkReconciles = { success: 0, error: 0 };
  const hn = new HostNetwork({
    eniMtu: o.eniMtu,
    externalSnat: o.externalSnat,
    excludeSnatCidrs: o.excludeSnatCidrs,
    ...o.traffic,
    onConnmarkReconcile: (r) => connmarkReconciles[r]++,
    log: o.log,
    ...(o.netns ? { netns: o.netns } : {}),
  });
  const node = await hn.setupNode({ primaryMac: o.primaryMac, nodeIp: o.nodeIp, vpcCidrs: o.vpcCidrs });
  // Checked, not set (docs/design.md#12-running-on-a-cluster item 7): a wrong one is reported (log, metric, /v1/status) and ipamd serves on.
  let sysctls = node.sysctls;
  reportSysctls(o.log, sysctls);
  const sysctlTask = node.primaryIf
    ? new PeriodicTask({
        intervalMs: SYSCTL_RECHECK_MS,
        run: () =>
          hn.checkSysctls(node.primaryIf!).then((c) => {
            reportSysctls(o.log, c, sysctls);
            sysctls = c;
          }),
      })
    : undefined;
  sysctlTask?.start();
  const { recheck: recheckVpcCidrs, current: vpcCidrs } = followVpcCidrs(o, hn);
  const vpcTask = o.vpcCidrRecheck
    ? new PeriodicTask({ intervalMs: o.vpcCidrRecheck.intervalMs, run: recheckVpcCidrs })
    : undefined;
  vpcTask?.start();
  const applied = new Map<string, EniInfo>();
  /** Set up through the hook, not yet seen in the datastore: never torn down as "freed". */
  const viaHook = new Set<string>();
  let running: Promise<void> | undefined;
  const setupEni = async (eni: EniInfo, hook = false) => {
    await hn.setupEni(eni);
    applied.set(eni.eniId, eni);
    if (hook) viaHook.add(eni.eniId);
    o.log.info(
      { eniId: eni.eniId, deviceNumber: eni.deviceNumber, table: eniRouteTable(eni.deviceNumber) },
      'host networking set up for ENI',
    );
  };
  const pass = async () => {
    const now = new Map(
      o.ds
        .listEnis()
        .filter((e) => !e.isPrimary)
        .map((e) => [e.eniId, e]),
    );
    for (const [id, eni] of now) if (!applied.has(id)) await setupEni(eni);
    for (const id of viaHook) if (now.has(id)) viaHook.delete(id);
    for (const [id, eni] of applied) {
      if (now.has(id) || viaHook.has(id) || o.ds.getEni(id)) continue;
      await hn.teardownEni(eni);
      applied.delete(id);
      o.log.info({ eniId: id }, 'host networking removed for freed ENI');
    }
  };
  const sync = () =>
    (running ??= pass()
      .catch((e: Error) => o.log.error({ err: e.message }, 'host networking sync failed; retrying'))
      .finally(() => {
        running = undefined;
      }));
  for (const eni of o.ds.listEnis())
    if (!eni.isPrimary) {
      await hn.setupEni(eni);
      applied.set(eni.eniId, eni);
    }
  const syncTask = new PeriodicTask({ intervalMs: o.intervalMs, run: sync });
  syncTask.start();
  return {
    sync,
    setupEni: (eni) => setupEni(eni, true),
    stop: () => {
      void syncTask.stop();
      void sysctlTask?.stop();
      void vpcTask?.stop();
    },
    sysctls: () => sysctls,
    vpcCidrs,
    recheckVpcCidrs,
    connmarkReconciles: () => ({ ...connmarkReconciles }),
  };
}

/**
 * Logs each sysctl of `checks` that is wrong and was not wrong with the same value in
 * `prev` (the previous check, if any), and each that `prev` had wrong and is right now.
 */
function reportSysctls(log: Logger, checks: SysctlCheck[], prev?: SysctlCheck[]): void {
  for (const c of checks) {
    const before = prev?.find((p) => p.sysctl === c.sysctl);
    if (!c.ok && (!before || before.ok || before.value !== c.value))
      log.error(
        { sysctl: c.sysctl, value: c.value, expected: c.expected, problem: c.problem },
        'node kernel setting is wrong (ipamd checks it; the privileged init container sets it)',
      );
    if (c.ok && before && !before.ok)
      log.info({ sysctl: c.sysctl, value: c.value }, 'node kernel setting is right now');
  }
}

/**
 * The VPC CIDR blocks the node rules and SNAT chain hold (`current()`, starting from
 * `o.vpcCidrs`), and `recheck()`: one re-read through `o.vpcCidrRecheck` (see
 * {@link vpcCidrStep}) that rewrites the node setup when the list changed. `recheck()`
 * does nothing without `vpcCidrRecheck` and never rejects.
 */
function followVpcCidrs(
  o: Pick<HostNetworkSyncOptions, 'log' | 'primaryMac' | 'nodeIp' | 'vpcCidrs' | 'vpcCidrRecheck'>,
  hn: HostNetwork,
): { recheck(): Promise<void>; current(): string[] } {
  let vpcCidrs = [...o.vpcCidrs];
  let shrinkSeen: string[] | undefined;
  const recheck = async () => {
    const r = o.vpcCidrRecheck;
    if (!r) return;
    try {
      const read = await r.read();
      const d = vpcCidrStep(vpcCidrs, read, shrinkSeen);
      shrinkSeen = d.shrinkSeen;
      if (d.shrinkSeen)
        o.log.info({ now: vpcCidrs, read }, 'IMDS lists fewer VPC CIDR blocks; applied if the next read agrees');
      if (!d.apply) return;
      const fresh = d.apply;
      await hn.setupNode({ primaryMac: o.primaryMac, nodeIp: o.nodeIp, vpcCidrs: fresh });
      o.log.info({ before: vpcCidrs, after: fresh }, 'VPC CIDR blocks changed; node rules and SNAT chain rewritten');
      vpcCidrs = fresh;
      r.onChange?.(fresh);
    } catch (e) {
      o.log.warn({ err: (e as Error).message }, 'VPC CIDR blocks not re-read; keeping the current ones');
    }
  };
  return { recheck, current: () => vpcCidrs };
}

/**
 * One step of the VPC CIDR re-read, pure: `current` is what the rules hold, `read` what
 * IMDS just listed, `shrinkSeen` a shorter list read last time and not applied yet.
 * @returns `apply`: the list to apply now, if any (a new, non-empty list that drops no
 *          block, or one that drops blocks and equals `shrinkSeen`: two reads agree);
 *          `shrinkSeen`: the shorter list to confirm next time, if any.
 */
export function vpcCidrStep(
  current: readonly string[],
  read: readonly string[],
  shrinkSeen: readonly string[] | undefined,
): { apply?: string[]; shrinkSeen?: string[] } {
  const fresh = [...new Set(read)];
  if (!fresh.length) return shrinkSeen ? { shrinkSeen: [...shrinkSeen] } : {};
  if (sameSet(fresh, current)) return {};
  const drops = current.some((c) => !fresh.includes(c));
  if (drops && !(shrinkSeen && sameSet(fresh, shrinkSeen))) return { shrinkSeen: fresh };
  return { apply: fresh };
}

/** True when `a` and `b` hold the same strings (order ignored). */
function sameSet(a: readonly string[], b: readonly string[]): boolean {
  const sb = new Set(b);
  return a.length === sb.size && a.every((x) => sb.has(x));
}
