/**
 * Start-up step of ipamd (called by `startDaemon` in ../daemon.ts): the pool targets and
 * ENI limits from the config and the instance type, the ENI manager (with the adopted
 * half-done ENI work registered) and the pool controller over them. Nothing is started.
 */
import type { IpamdConfig } from '../config.js';
import type { Ec2Port } from '../cloud/ec2-port.js';
import { EniManager, type EniManagerOptions } from '../controller/eni-lifecycle/eni-manager.js';
import type { EniConfigSelection } from '../controller/eni-lifecycle/placement-types.js';
import { SubnetPlacement } from '../controller/eni-lifecycle/subnet-placement-source.js';
import { PoolController, type PoolControllerOptions } from '../controller/pool-loop/pool-controller.js';
import type { ReleaseGate } from '../controller/release/release-gate.js';
import type { EniInventory, PoolCounts, ReleasePhases } from '../datastore/roles.js';
import type { Logger } from '../log.js';
import type { IpamdMetrics } from '../observability/metrics.js';
import type { PoolTargets } from '../pool/index.js';
import { registerAdoption, type AdoptionPlan } from './adopt.js';
import type { NodeInventory } from './discover.js';

/** The pool and what it was built from (see {@link buildPool}). */
export interface PoolWiring {
  /** Effective ENI cap: MAX_ENI bounded by the instance type's limit. */
  maxEni: number;
  targets: PoolTargets;
  /** Limits as shown by introspection and the pool's messages. */
  limits: {
    instanceType: string;
    instanceMaxEnis: number;
    ipv4PerEni: number;
    maxEniSetting?: number;
  };
  enis: EniManager;
  pool: PoolController;
  /** Subnets new ENIs skip now because EC2 said they are full, with EC2's code and when the mark ends (ms epoch). */
  exhaustedSubnets: () => Array<{ subnetId: string; code: string; untilMs: number }>;
  /**
   * Lets the pool create new ENIs: call once the leftover ENIs of a previous ipamd are
   * settled (eni-settle.ts; a wanted one is attached instead of a new one) or will not be.
   */
  leftoversSettled: () => void;
}

/**
 * Builds the ENI manager and pool controller of a node. `setupEni` is the host networking
 * of a new ENI, run before its IPs can be handed out (given only when ENI_IPAM_HOST_NETWORK
 * is on; it may reject while host networking is not started yet).
 */
export function buildPool(p: {
  config: IpamdConfig;
  /** The node's inventory; its EC2 client is not used: `ec2` is. */
  inv: Omit<NodeInventory, 'ec2'>;
  /** The EC2 port the parts call (in ipamd: the client guarded by the inventory cache, cache-guarded-ec2.ts). */
  ec2: Ec2Port;
  ds: PoolCounts & ReleasePhases & EniInventory;
  gate: ReleaseGate;
  log: Logger;
  metrics: IpamdMetrics;
  unit: PoolTargets['unit'];
  adoption: AdoptionPlan;
  setupEni?: NonNullable<EniManagerOptions['beforeEniUsable']>;
  /** The node's ENIConfig selection now (custom networking); omit: off. */
  eniConfig?: () => EniConfigSelection;
  /** Custom networking: why no ENI may be created now (the ENIConfig), or undefined. */
  eniCreationRefused?: PoolControllerOptions['eniCreationRefused'];
  /** Why the pool must neither grow nor free an ENI now (a cordoned node), or undefined. */
  managementPaused?: PoolControllerOptions['managementPaused'];
}): PoolWiring {
  const { config, inv, ds, gate, log, metrics, unit, adoption } = p;
  const { maxEni, targets } = poolTargets(config, inv, unit);
  // Where new ENIs go: ENIConfig subnets, discovered subnets or the node subnet (subnet-placement.ts).
  const placement = new SubnetPlacement({
    ec2: p.ec2,
    node: {
      subnetId: inv.primary.subnetId,
      cidr: inv.primary.subnetCidr,
      vpcId: inv.primary.vpcId,
      availabilityZone: inv.instance.availabilityZone,
      securityGroupIds: inv.primary.securityGroupIds,
      ...(config.clusterName ? { clusterName: config.clusterName } : {}),
    },
    ...(p.eniConfig ? { selection: p.eniConfig } : {}),
    discovery: config.enableSubnetDiscovery,
    // What a full new ENI takes from its subnet: its primary IP plus every slot (a /28 is 16 addresses).
    perEniAddresses: 1 + (inv.limits.ipv4PerEni - 1) * (config.enablePrefixDelegation ? 16 : 1),
    log,
    onDescribed: (s) => metrics.subnetFree(s.subnetId, s.availableIps),
    onExhausted: (subnetId, exhausted) => metrics.subnetExhausted(subnetId, exhausted),
  });
  const enis = new EniManager({
    ec2: p.ec2,
    ds,
    gate,
    log,
    instance: {
      instanceId: inv.instance.instanceId,
      subnetId: inv.primary.subnetId,
      subnetCidr: inv.primary.subnetCidr,
      securityGroupIds: inv.primary.securityGroupIds,
      maxEnis: maxEni,
      ipsPerEni: inv.limits.ipv4PerEni - 1,
    },
    ...(config.clusterName ? { clusterName: config.clusterName } : {}),
    additionalTags: config.additionalEniTags,
    unmanagedDeviceIndexes: new Set(inv.unmanaged.map((e) => e.attachment?.deviceIndex ?? -1)),
    imds: inv.imds,
    imdsWaitMs: config.imdsEniWaitMs,
    prefixDelegation: config.enablePrefixDelegation,
    ...(p.setupEni ? { beforeEniUsable: p.setupEni } : {}),
    placement,
    onSubnetFull: (subnetId) => metrics.subnetFree(subnetId, 0),
  });
  // Each attached ENI's own subnet CIDR (IMDS subnet-ipv4-cidr-block): ENIs may be outside the node subnet.
  for (const e of inv.imdsEnis) enis.learnSubnetCidr(e.subnetId, e.subnetCidr);
  registerAdoption(adoption, enis, log);
  const limits = {
    instanceType: inv.instance.instanceType,
    instanceMaxEnis: inv.limits.maxEnis,
    ipv4PerEni: inv.limits.ipv4PerEni,
    ...(config.maxEni !== undefined ? { maxEniSetting: config.maxEni } : {}),
  };
  // New ENIs wait for the start-up settle of leftovers (a wanted leftover stands in for one).
  let leftoversSettled!: () => void;
  const newEnisAfter = new Promise<void>((r) => (leftoversSettled = r));
  const pool = new PoolController({
    ds,
    ec2: p.ec2,
    enis,
    gate,
    log,
    targets,
    limits,
    intervalMs: config.poolIntervalMs,
    shrinkDelayMs: config.shrinkDelayMs,
    minEniAgeMs: config.minEniAgeMs,
    onGrowFailed: (kind) => metrics.ipamdError(`grow_${kind}`),
    onSubnetFull: (subnetId) => metrics.subnetFree(subnetId, 0),
    onStepError: () => metrics.ipamdError('pool_step'),
    inProgress: metrics.inProgress,
    ...(p.eniCreationRefused ? { eniCreationRefused: p.eniCreationRefused } : {}),
    ...(p.managementPaused ? { managementPaused: p.managementPaused } : {}),
    newEnisAfter,
  });
  return {
    maxEni,
    targets,
    limits,
    enis,
    pool,
    exhaustedSubnets: () => placement.exhaustedNow(),
    leftoversSettled,
  };
}

/** The pool targets of `config` on `inv`'s instance type; `maxEni`: MAX_ENI bounded by the type's limit. */
function poolTargets(
  config: IpamdConfig,
  inv: Omit<NodeInventory, 'ec2'>,
  unit: PoolTargets['unit'],
): { maxEni: number; targets: PoolTargets } {
  const maxEni = Math.min(config.maxEni ?? inv.limits.maxEnis, inv.limits.maxEnis);
  const targets: PoolTargets = {
    warmEniTarget: config.warmEniTarget,
    maxEni,
    ...(config.warmIpTarget !== undefined ? { warmIpTarget: config.warmIpTarget } : {}),
    ...(config.minimumIpTarget !== undefined ? { minimumIpTarget: config.minimumIpTarget } : {}),
    unit,
    ...(config.warmPrefixTarget !== undefined ? { warmPrefixTarget: config.warmPrefixTarget } : {}),
  };
  return { maxEni, targets };
}
