/**
 * Never beside a live aws-node (docs/design.md#never-beside-a-live-aws-node): before ipamd
 * manages the node (after its one-per-node guards, before discovery, adoption, the aws-node
 * import and any host networking), it looks for aws-node's signs (aws-node-presence.ts)
 * and, while there is one, stands by (standby.ts): one log line and a Warning Event
 * `AwsNodeRunning` naming what it found, the node condition `eni-ipam.io/IPAllocatable=False`
 * with that reason, liveness answered, not ready; then it looks again every `intervalMs`
 * until every sign is gone. A stale aws-node checkpoint is no sign: it is imported after.
 */
import type { IpamdConfig } from '../config.js';
import type { Logger } from '../log.js';
import {
  lookForAwsNode,
  type AwsNodeLookOptions,
  type AwsNodeSign,
  type CheckpointStamp,
} from './aws-node-presence.js';
import { startStandby, type Standby } from './standby.js';

/** The Event and condition reason while aws-node runs on the node. */
export const AWS_NODE_RUNNING = 'AwsNodeRunning';

/** The one line naming what ipamd found. */
export function awsNodeRunningLine(signs: readonly AwsNodeSign[]): string {
  return `aws-node is running on this node: ${signs.map((s) => s.saw).join('; ')}. eni-ipam does not manage a node beside a live aws-node (two IPAMs hand out the same addresses); it takes over once aws-node is gone (keep aws-node off this node: docs/install-eks.md, step 3)`;
}

/**
 * Waits until no sign of aws-node is left; resolves at once when there is none (or
 * ENI_IPAM_AWS_NODE_CHECK=false). `look` overrides the sources' options (tests: ports).
 * Only SIGTERM (the process's stop handlers) ends a wait that never clears.
 */
export async function waitUntilAwsNodeGone(
  config: Pick<
    IpamdConfig,
    'awsNodeCheck' | 'awsNodeSocket' | 'awsNodeCheckpointPath' | 'awsNodeQuietMs' | 'socketPath' | 'nodeName'
  >,
  log: Logger,
  o: { intervalMs?: number; look?: Partial<AwsNodeLookOptions> } = {},
): Promise<void> {
  if (!config.awsNodeCheck) {
    log.info('ENI_IPAM_AWS_NODE_CHECK=false: not looking for a live aws-node');
    return;
  }
  const look: AwsNodeLookOptions = {
    socket: config.awsNodeSocket,
    checkpoint: config.awsNodeCheckpointPath,
    quietMs: config.awsNodeQuietMs,
    ...o.look,
  };
  let stamp: CheckpointStamp;
  let said = '';
  let standby: Standby | undefined;
  const t0 = Date.now();
  try {
    for (;;) {
      const found = await lookForAwsNode(look, stamp);
      stamp = found.stamp;
      if (found.signs.length === 0) break;
      const key = found.signs.map((s) => `${s.source} ${s.where}`).join(',');
      if (key !== said) {
        said = key;
        standby ??= await startStandby(config, log);
        await standby.report({ reason: AWS_NODE_RUNNING, message: awsNodeRunningLine(found.signs), condition: true });
      }
      await new Promise((r) => setTimeout(r, o.intervalMs ?? 2000)); // the re-check period, not a wait for an event
    }
  } finally {
    await standby?.close();
  }
  if (standby) log.info({ waitedMs: Date.now() - t0 }, 'aws-node is gone from this node: eni-ipam takes it over');
}
