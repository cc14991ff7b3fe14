/**
 * The pool controller's unit-test kit: {@link executorKit}'s real parts (datastore, ENI
 * manager, release gate, MemoryEc2) with a real {@link PoolController} over them, all on
 * one {@link VirtualTime} (its clock and timers): intervals (ms) short enough to read.
 */
import { PoolController, type PoolControllerOptions } from '../../ipamd/controller/pool-loop/pool-controller.js';
import { executorKit, T0, type KitOptions } from './executor-kit.js';
import { VirtualTime } from './virtual-time.js';

/** Period of the controller's re-evaluation (ms). */
export const INTERVAL_MS = 5_000;
/** How long a surplus must persist before it is released (ms). */
export const SHRINK_DELAY_MS = 30_000;
/** Longest delay of the step after an ADD or DEL (ms). */
export const CHANGE_DELAY_MS = 100;

/**
 * A node (m5.large: 9 secondary IPs per ENI; see {@link executorKit}) with its pool
 * controller on virtual time (`vt`), not started. `steps` counts the pool steps run.
 */
export function controllerKit(o: KitOptions & Pick<PoolControllerOptions, 'managementPaused' | 'newEnisAfter'> = {}) {
  const vt = new VirtualTime(T0);
  const k = executorKit({ ...o, clock: vt });
  let steps = 0;
  const failedKinds: string[] = [];
  const pool = new PoolController({
    ds: k.ds,
    ec2: k.ec2,
    enis: k.enis,
    gate: k.gate,
    log: k.log,
    targets: k.targets,
    intervalMs: INTERVAL_MS,
    shrinkDelayMs: SHRINK_DELAY_MS,
    changeDelayMs: CHANGE_DELAY_MS,
    now: vt.now,
    timers: vt,
    inProgress: () => () => void steps++,
    onGrowFailed: (kind) => failedKinds.push(kind),
    ...(o.managementPaused ? { managementPaused: o.managementPaused } : {}),
    ...(o.minEniAgeMs !== undefined ? { minEniAgeMs: o.minEniAgeMs } : {}),
    ...(o.newEnisAfter ? { newEnisAfter: o.newEnisAfter } : {}),
  });
  const available = () => k.ds.counts(vt.now()).available;
  return {
    ...k,
    vt,
    pool,
    available,
    failedKinds,
    get steps() {
      return steps;
    },
  };
}
