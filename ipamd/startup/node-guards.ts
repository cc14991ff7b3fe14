/**
 * ipamd's one-per-node guards, taken in this order before it opens its log or reads or
 * writes anything on the node (docs/design.md#one-ipamd-per-node):
 * 1. the instance guard (node-guard.ts): an abstract socket named after the EC2 instance
 *    read from IMDS, so every ipamd of the instance in this network namespace meets it,
 *    whatever its directories and however its IMDS endpoint is spelled;
 * 2. the state directory's lock (checkpoint-lock.ts): a flock on `<checkpoint dir>/ipamd.lock`,
 *    so every ipamd that shares the checkpoint meets it, in any network namespace.
 * A second ipamd is refused by the first guard it meets, with one line naming the holder.
 */
import path from 'node:path';
import type { IpamdConfig } from '../config.js';
import { acquireCheckpointLock, type CheckpointLock } from './checkpoint-lock.js';
import { selfHolder } from './guard-holder.js';
import type { InstanceIdentity } from './instance-identity.js';
import { acquireNodeGuard, nodeGuardName, type NodeGuard } from './node-guard.js';

/** The guards' view of the config. */
export type GuardConfig = Pick<IpamdConfig, 'socketPath' | 'checkpointPath' | 'logFile' | 'daemonSet'>;

/**
 * Takes both guards for `config` on instance `id`; the instance guard is held until the
 * returned lock is released or the process ends, the state-directory lock likewise (the
 * kernel frees both). A failed second take frees the first.
 * @throws GuardHeldError naming the holder when another ipamd holds either guard; the
 *         socket, fs or flock(1) error otherwise.
 */
export async function takeNodeGuards(config: GuardConfig, id: InstanceIdentity): Promise<CheckpointLock> {
  const me = selfHolder({
    instanceId: id.instanceId,
    ...(config.daemonSet ? { daemonSet: config.daemonSet } : {}),
    socket: config.socketPath,
    checkpoint: config.checkpointPath,
    logFile: config.logFile,
  });
  const guard: NodeGuard = await acquireNodeGuard(nodeGuardName(id), me);
  let lock: CheckpointLock;
  try {
    lock = await acquireCheckpointLock(path.dirname(config.checkpointPath), me);
  } catch (e) {
    await guard.release();
    throw e;
  }
  return {
    file: lock.file,
    release: async () => {
      await lock.release();
      await guard.release();
    },
  };
}
