/**
 * Pure pool decisions (docs/design.md#pool-math): counts, grow and shrink plans, and the
 * release hysteresis. Imports nothing from Node I/O, cloud, network or rpc.
 */
export { ADDRESSES_PER_SLOT } from './types.js';
export type { AllocationUnit, GrowPlan, PoolCounts, PoolEniView, PoolTargets, ShrinkPlan } from './types.js';
export { freePrefixCount, isWarmPrefixMode, poolCounts } from './counts.js';
export { planGrow } from './grow.js';
export { planShrink } from './shrink.js';
export { SurplusTracker } from './surplus.js';
