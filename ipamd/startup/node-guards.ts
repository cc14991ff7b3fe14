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
import { readInstanceIdentity } from './instance-identity.js';
import { acquireNodeGuard, nodeGuardName } from './node-guard.js';

/**
 * Takes both guards for `config`; the instance guard is held until the process ends (the
 * kernel frees it), the returned state-directory lock until it is released (startDaemon's
 * stop) or the process ends. `warn` gets each failed IMDS attempt (default: stderr).
 * @throws Error naming the holder when another ipamd holds either guard; the IMDS, socket,
 *         fs or flock(1) error otherwise.
 */
export async function takeNodeGuards(
  config: Pick<IpamdConfig, 'imdsEndpoint' | 'socketPath' | 'checkpointPath' | 'logFile' | 'daemonSet'>,
  warn: (line: string) => void = (l) => process.stderr.write(`eni-ipamd: ${l}\n`),
): Promise<CheckpointLock> {
  const id = await readInstanceIdentity(config.imdsEndpoint, { warn });
  const me = selfHolder({
    instanceId: id.instanceId,
    ...(config.daemonSet ? { daemonSet: config.daemonSet } : {}),
    socket: config.socketPath,
    checkpoint: config.checkpointPath,
    logFile: config.logFile,
  });
  await acquireNodeGuard(nodeGuardName(id), me);
  return acquireCheckpointLock(path.dirname(config.checkpointPath), me);
}
