/** The options of the pool controller (pool-controller.ts), in their own file to keep it small. */
import type { Timers } from '../../clock.js';
import type { EniInventory, PoolCounts, ReleasePhases } from '../../datastore/roles.js';
import type { Ec2Port } from '../../cloud/ec2-port.js';
import type { Logger } from '../../log.js';
import type { PoolTargets } from '../../pool/index.js';
import type { EniLimits } from '../../pool/grow-limits.js';
import type { EniManager } from '../eni-lifecycle/eni-manager.js';
import type { EniConfigBlockKind, GrowFailureKind } from './grow-executor.js';
import type { ReleaseGate } from '../release/release-gate.js';

/** Options of {@link PoolController}. */
export interface PoolControllerOptions {
  ds: PoolCounts & ReleasePhases & EniInventory;
  ec2: Ec2Port;
  enis: EniManager;
  gate: ReleaseGate;
  log: Logger;
  targets: PoolTargets;
  /** Where the ENI limits come from, to name the binding one when grow is blocked (omit: the pure plan's wording). */
  limits?: EniLimits;
  /** Re-evaluation period when nothing triggers a step (ms). */
  intervalMs: number;
  /** How long a surplus must persist before it is released (ms). */
  shrinkDelayMs: number;
  /** Minimum ENI age before it may be freed (ms, default 60 000). */
  minEniAgeMs?: number;
  /** Longest delay of the step after an ADD or DEL (ms, default {@link CHANGE_STEP_DELAY_MS}). */
  changeDelayMs?: number;
  /** How long grow pauses after InsufficientFreeAddressesInSubnet / InsufficientCidrBlocks (ms, default 30 000). */
  subnetFullPauseMs?: number;
  now?: () => number;
  /** The timers of the loop's delays (default: Node's; unit tests pass virtual ones with `now`). */
  timers?: Timers;
  /** Told of each failed grow attempt (kind) and each failed step (metrics). */
  onGrowFailed?: (kind: GrowFailureKind) => void;
  onSubnetFull?: (subnetId: string) => void;
  onStepError?: () => void;
  /** Marks a pool step in progress (metrics); the result is called when it ends. */
  inProgress?: (fn: string) => () => void;
  /** Why no ENI may be created now (custom networking without a usable ENIConfig); see GrowExecutorOptions. */
  eniCreationRefused?: () => { kind: EniConfigBlockKind; reason: string } | undefined;
  /** Why the pool may neither grow nor free an ENI now (a cordoned node: startup/node-schedule-wiring.ts); memory only. */
  managementPaused?: () => string | undefined;
  /** No new ENI is created until this settles (GrowExecutorOptions.newEnisAfter). */
  newEnisAfter?: Promise<unknown>;
}
