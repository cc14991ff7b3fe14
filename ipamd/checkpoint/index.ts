/**
 * The checkpoint store (docs/design.md#checkpoint): format, load-with-quarantine, and the
 * group-commit writer.
 */
export type { CheckpointAllocation, CheckpointData } from './schema.js';
export { CHECKPOINT_VERSION, checkpointSchema } from './schema.js';
export { checkpointBoundsFor, loadCheckpoint, readBootId, type CheckpointBounds, type CheckpointLoad } from './load.js';
export { CheckpointWriter, type CheckpointWriterOptions } from './writer.js';
