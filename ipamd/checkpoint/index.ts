/**
 * The checkpoint store (docs/design.md#3-contracts, "Checkpoint"): format, the journal
 * beside the snapshot, load-with-quarantine, and the group-commit writer.
 */
export type { CheckpointAllocation, CheckpointData } from './schema.js';
export { CHECKPOINT_VERSION, checkpointSchema } from './schema.js';
export { JOURNAL_SUFFIXES, type JournalRecord } from './journal.js';
export {
  checkpointBoundsFor,
  loadCheckpoint,
  readBootId,
  readCheckpoint,
  type CheckpointBounds,
  type CheckpointLoad,
  type CheckpointRead,
  type JournalLoad,
} from './load.js';
export { CheckpointWriter, type CheckpointSource, type CheckpointWriterOptions } from './writer.js';
