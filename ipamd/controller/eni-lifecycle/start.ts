/**
 * Starts the background ENI lifecycle work beside the pool controller: the EC2/IMDS
 * reconcile (ENI_IPAM_RECONCILE_INTERVAL), after its first successful pass the settle of
 * the ENIs a previous ipamd created for this node and never attached (eni-settle.ts), and the leaked-ENI sweep
 * (ENI_IPAM_LEAKED_ENI_SWEEP_INTERVAL after a random start delay up to
 * ENI_IPAM_LEAKED_ENI_SWEEP_JITTER; off with DISABLE_LEAKED_ENI_CLEANUP). Both are off
 * with DISABLE_NETWORK_RESOURCE_PROVISIONING (the caller does not start them then).
 * After a successful reconcile pass, the subnets of the node's ENIs are described (one
 * DescribeSubnets per subnet, off the ADD path) for their free-address count — but only
 * when this node changed what it holds in that subnet since the last describe, or every
 * {@link SUBNET_REFRESH_MS} otherwise: EC2 calls are a shared per-account budget, and a
 * fleet describing its subnets every minute for a gauge would spend it on nothing. The
 * readings outlive a restart (subnet-free-cache.ts, `subnet-free.json` beside the
 * checkpoint): a restart sets the gauge from them and describes only what the rule
 * above asks for, so a fleet restarting together spends no DescribeSubnets on it.
 */
import { monoNow } from '../../clock.js';
import type { Ec2Port } from '../../cloud/ec2-port.js';
import path from 'node:path';
import type { IpamdConfig } from '../../config.js';
import type { EniManager } from './eni-manager.js';
import { EniReconciler, type ExclusivePool, type ReconcileReport } from './eni-reconcile.js';
import { LeakedEniSweeper, type SweepReport } from './leak-sweep.js';
import type { ReleaseGate } from '../release/release-gate.js';
import type { DatastoreViews, EniInventory, PoolCounts } from '../../datastore/roles.js';
import { settleLeftoverEnis, type SettleOptions, type SettleReport } from './eni-settle.js';
import type { Logger } from '../../log.js';
import type { NodeInventory } from '../../cloud/node-inventory.js';
import { readSubnetReadings, writeSubnetReadings, type SubnetReading } from './subnet-free-cache.js';

/** How often a subnet's free-address count is re-read when this node changed nothing in it, ms. */
export const SUBNET_REFRESH_MS = 10 * 60_000;

/** The running lifecycle tasks. */
export interface EniLifecycle {
  reconciler: EniReconciler;
  sweeper?: LeakedEniSweeper;
  /** JSON for `/v1/status`. */
  status(): {
    pendingEnis: string[];
    orphanEnis: string[];
    reconcilePasses: number;
    lastReconcile: ReconcileReport | null;
    lastSweep: SweepReport | null;
    sweepEnabled: boolean;
    /** What the start-up settle of leftover ENIs did (eni-settle.ts); null until it ran. */
    startSettle: SettleReport | null;
  };
  stop(): Promise<void>;
}

/** Options of {@link startEniLifecycle}. */
export interface EniLifecycleOptions {
  config: IpamdConfig;
  /** The node's inventory; its EC2 client is not used: `ec2` is. */
  inv: Omit<NodeInventory, 'ec2'>;
  /** The EC2 port the parts call (in ipamd: the client guarded by the inventory cache, cache-guarded-ec2.ts). */
  ec2: Ec2Port;
  ds: EniInventory & PoolCounts & Pick<DatastoreViews, 'allocations' | 'pendingAllocations'>;
  gate: ReleaseGate;
  enis: EniManager;
  pool: ExclusivePool & Pick<SettleOptions['pool'], 'attachLeftoverIfWanted'>;
  log: Logger;
  /** Metrics hooks: each pass's report, and each subnet's free addresses. */
  metrics?: { reconciled(r: ReconcileReport): void; subnetFree(subnetId: string, free: number): void };
  /** Delay of the first reconcile pass (ms, default 0: at once); `onFirstOkPass` is told of the first pass that succeeded. */
  firstPassDelayMs?: number;
  onFirstOkPass?: (r: ReconcileReport) => void;
  /**
   * Told once the start-up settle of leftover ENIs has decided (or failed), or after
   * {@link SETTLE_WAIT_MS} without a successful reconcile pass: new ENIs may be created.
   */
  onLeftoversSettled?: () => void;
}

/** Longest wait for the leftover settle before new ENIs may be created anyway (ms): EC2 answers no describe meanwhile. */
export const SETTLE_WAIT_MS = 30_000;

/** Starts the reconcile (one pass at once) and, unless disabled, the sweep. Never throws. */
export function startEniLifecycle(p: EniLifecycleOptions): EniLifecycle {
  const { config, inv, enis, log } = p;
  const described = new Map<string, SubnetReading>();
  const readingsFile = path.join(path.dirname(config.checkpointPath), 'subnet-free.json');
  // The previous process's readings: the gauge at once, and no describe the rule does not ask for.
  const restored = p.metrics
    ? readSubnetReadings(readingsFile, Date.now(), SUBNET_REFRESH_MS).then((m) => {
        for (const [subnetId, r] of m) {
          if (described.has(subnetId)) continue;
          described.set(subnetId, r);
          p.metrics?.subnetFree(subnetId, r.free);
        }
      })
    : Promise.resolve();
  const describeSubnets = async () => {
    await restored;
    const now = monoNow();
    let changed = false;
    const views = new Map(p.ds.poolViews(now).map((v) => [v.eniId, v.total]));
    const held = new Map<string, number>();
    for (const e of p.ds.listEnis()) held.set(e.subnetId, (held.get(e.subnetId) ?? 0) + (views.get(e.eniId) ?? 0));
    for (const [subnetId, total] of held) {
      const last = described.get(subnetId);
      if (last && last.held === total && now - last.at < SUBNET_REFRESH_MS) continue;
      try {
        const free = (await p.ec2.describeSubnet(subnetId)).availableIps;
        p.metrics?.subnetFree(subnetId, free);
        described.set(subnetId, { at: now, held: total, free });
        changed = true;
      } catch (e) {
        log.debug(
          { subnetId, err: (e as Error).message },
          'could not describe the subnet (free addresses metric not updated)',
        );
      }
    }
    const err = changed ? await writeSubnetReadings(readingsFile, described) : undefined;
    if (err) log.debug({ file: readingsFile, err }, 'could not keep the subnet readings (the next start describes)');
  };
  let firstOk = p.onFirstOkPass;
  const leftovers = leftoverSettle(p);
  const reconciler = new EniReconciler({
    ec2: p.ec2,
    imds: inv.imds,
    ds: p.ds,
    enis,
    pool: p.pool,
    log,
    instanceId: inv.instance.instanceId,
    intervalMs: config.reconcileIntervalMs,
    onPass: (r: ReconcileReport) => {
      if (r.ok) leftovers.run();
      if (r.ok && firstOk) {
        const fn = firstOk;
        firstOk = undefined;
        fn(r);
      }
      p.metrics?.reconciled(r);
      if (r.ok && p.metrics) void describeSubnets();
    },
  });
  reconciler.start(p.firstPassDelayMs ?? 0);
  const sweeper = startLeakedEniSweep({ config, inv, ec2: p.ec2, gate: p.gate, enis, log });
  return {
    reconciler,
    ...(sweeper ? { sweeper } : {}),
    status: () => ({
      pendingEnis: enis.pendingIds(),
      orphanEnis: enis.orphanIds(),
      reconcilePasses: reconciler.passes,
      lastReconcile: reconciler.last ?? null,
      lastSweep: sweeper?.last ?? null,
      sweepEnabled: !!sweeper,
      startSettle: leftovers.report() ?? null,
    }),
    async stop() {
      await leftovers.stop();
      await sweeper?.stop();
      await reconciler.stop();
    },
  };
}

/**
 * The start-up settle of the leftover ENIs of a previous ipamd (eni-settle.ts): `run()`
 * starts it once (after the first reconcile pass that read EC2, so the datastore's ENIs are
 * in step); `onLeftoversSettled` is told once it decided, or after {@link SETTLE_WAIT_MS}.
 */
function leftoverSettle(p: EniLifecycleOptions) {
  const { config, inv, enis, log } = p;
  let settle: Promise<unknown> | undefined;
  let report: SettleReport | undefined;
  let told = false;
  const tell = () => {
    clearTimeout(valve);
    if (told) return;
    told = true;
    p.onLeftoversSettled?.();
  };
  // No new ENI waits longer for it (EC2 not answering: a creation would fail anyway).
  const valve = setTimeout(tell, SETTLE_WAIT_MS);
  return {
    run(): void {
      settle ??= settleLeftoverEnis({
        ec2: p.ec2,
        log,
        gate: p.gate,
        scope: {
          instanceId: inv.instance.instanceId,
          vpcId: inv.primary.vpcId,
          ...(config.clusterName ? { clusterName: config.clusterName } : {}),
          known: (id) => p.ds.getEni(id),
          allocations: () => [...p.ds.allocations(), ...p.ds.pendingAllocations()],
          isBusy: (id) => enis.isBusy(id),
        },
        placement: enis.placement,
        pool: p.pool,
        deleteUnwanted: !config.disableLeakedEniCleanup,
      })
        .then((r) => (report = r))
        .finally(tell);
    },
    report: (): SettleReport | undefined => report,
    async stop(): Promise<void> {
      tell();
      await settle;
    },
  };
}

/**
 * Starts the leaked-ENI sweep (first pass after a random delay up to
 * `config.leakedEniSweepJitterMs`, then every `config.leakedEniSweepIntervalMs`), or logs
 * that DISABLE_LEAKED_ENI_CLEANUP turned it off and returns undefined. Never throws.
 */
function startLeakedEniSweep(p: {
  config: IpamdConfig;
  inv: Omit<NodeInventory, 'ec2'>;
  /** The guarded EC2 port (see {@link EniLifecycleOptions.ec2}). */
  ec2: Ec2Port;
  gate: ReleaseGate;
  enis: EniManager;
  log: Logger;
}): LeakedEniSweeper | undefined {
  const { config, inv, enis, log } = p;
  if (config.disableLeakedEniCleanup) {
    log.info('DISABLE_LEAKED_ENI_CLEANUP=true: the leaked-ENI sweep is off');
    return undefined;
  }
  const sweeper = new LeakedEniSweeper({
    ec2: p.ec2,
    gate: p.gate,
    log,
    instanceId: inv.instance.instanceId,
    vpcId: inv.primary.vpcId,
    ...(config.clusterName ? { clusterName: config.clusterName } : {}),
    intervalMs: config.leakedEniSweepIntervalMs,
    jitterMs: config.leakedEniSweepJitterMs,
    isBusy: (id) => enis.isBusy(id),
  });
  sweeper.start();
  return sweeper;
}
