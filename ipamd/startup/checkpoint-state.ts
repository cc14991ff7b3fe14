/**
 * Start-up step of ipamd (called by `startDaemon` in ../daemon.ts): loads our checkpoint
 * (or imports aws-node's when ours is missing), restores the datastore from it and opens
 * the checkpoint writer, whose first commit is made before returning.
 */
import { monoAtBoot, monoNow } from '../clock.js';
import path from 'node:path';
import { checkpointBoundsFor, CheckpointWriter, loadCheckpoint, type CheckpointData } from '../checkpoint/index.js';
import type { IpamdConfig } from '../config.js';
import type { ReleaseGate } from '../controller/release/release-gate.js';
import type { ChangeJournal, PoolCounts, RestoreTarget } from '../datastore/roles.js';
import type { Logger } from '../log.js';
import { stageTrace } from '../service/stage-trace.js';
import { datastoreCheckpointSource } from '../checkpoint/datastore-source.js';
import { importAwsNodeCheckpoint } from './aws-node-import.js';
import { restoreFromCheckpoint } from './restore-checkpoint.js';

/** What {@link openCheckpointState} loaded and the writer it opened. */
export interface CheckpointState {
  /** The load result (after an aws-node import, the imported one). */
  load: Awaited<ReturnType<typeof loadCheckpoint>>;
  /** The aws-node import, when ours was missing (undefined otherwise). */
  fromAwsNode: Awaited<ReturnType<typeof importAwsNodeCheckpoint>> | undefined;
  /** The runtime identity this boot's checkpoint recorded (plausibility check), if any. */
  recordedIdentity: CheckpointData['runtime'];
  /** The writer; each append writes the datastore's changes, each compaction its whole state. */
  writer: CheckpointWriter;
  /** Replaces the source of the runtime identity kept in every write (the evidence sources, once started). */
  setRuntimeIdentity(source: () => CheckpointData['runtime']): void;
}

/**
 * Loads, restores and opens the checkpoint at `config.checkpointPath` for an instance
 * type with `maxEnis` ENIs of `ipv4PerEni` IPv4 addresses (bounds of what a checkpoint
 * may hold). Corrupt state is kept aside by the loader and restore starts frozen.
 * @throws what the first checkpoint commit throws (the file cannot be written).
 */
export async function openCheckpointState(p: {
  config: IpamdConfig;
  ds: ChangeJournal & RestoreTarget & PoolCounts;
  gate: ReleaseGate;
  log: Logger;
  bootId: string;
  maxEnis: number;
  ipv4PerEni: number;
}): Promise<CheckpointState> {
  const { config, ds, gate, log, bootId } = p;
  const bounds = checkpointBoundsFor(p.maxEnis, p.ipv4PerEni);
  let load = await loadCheckpoint(config.checkpointPath, bounds);
  // No checkpoint of our own: take over from aws-node's, if it left one this boot (docs/design.md#13-evidence-before-trust item 6).
  const fromAwsNode =
    load.kind === 'missing'
      ? await importAwsNodeCheckpoint({
          path: config.awsNodeCheckpointPath,
          asideDir: path.dirname(config.checkpointPath),
          bootId,
          networkName: config.networkName,
          maxEntries: bounds.maxEntries,
          log,
        })
      : undefined;
  if (fromAwsNode?.kind === 'imported') load = fromAwsNode.load;
  restoreFromCheckpoint({
    load,
    bootId,
    ds,
    gate,
    log,
    path: config.checkpointPath,
    now: monoNow(),
    monoAtBoot: monoAtBoot(),
    ...(fromAwsNode?.kind === 'imported' ? { importedFrom: config.awsNodeCheckpointPath } : {}),
  });
  // The runtime identity this boot's checkpoint recorded (plausibility check), kept in every write.
  const recordedIdentity = load.kind === 'ok' && load.data.bootId === bootId ? load.data.runtime : undefined;
  let runtimeIdentity = (): CheckpointData['runtime'] => recordedIdentity;
  // Each append writes what the datastore recorded as changed (O(changes)); compactions the whole state.
  const source = datastoreCheckpointSource({
    ds,
    bootId,
    releasedCap: bounds.maxEntries,
    runtime: () => runtimeIdentity(),
  });
  // Journal numbering goes on from the loaded state (checkpoint/journal.ts); each write's stages go to the trace.
  const writer = new CheckpointWriter(config.checkpointPath, source, {
    startSeq: load.kind === 'ok' && !fromAwsNode ? (load.data.journalSeq ?? 0) : 0,
    onStage: (stage, ms) => stageTrace.record(`checkpoint.${stage}`, ms),
    onBackgroundError: (e) =>
      log.warn(
        { err: e, path: config.checkpointPath },
        'checkpoint compaction failed; the journal keeps every change and the next write compacts again',
      ),
  });
  await writer.commit();
  return {
    load,
    fromAwsNode,
    recordedIdentity,
    writer,
    setRuntimeIdentity: (source) => {
      runtimeIdentity = source;
    },
  };
}
