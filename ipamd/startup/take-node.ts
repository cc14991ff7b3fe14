/**
 * How ipamd takes its node at start (before its log file, anything on the node, or the
 * aws-node check): it reads its instance from IMDS, then, running as a DaemonSet
 * (ENI_IPAM_DAEMONSET and MY_NODE_NAME set, the Kubernetes API configured), reads the
 * node's owner record (node-owner.ts) and takes the one-per-node guards (node-guards.ts).
 *
 * - Another existing DaemonSet owns the node: ipamd steps aside for good. It stays up and
 *   idle (no crash loop), says so once in its log and in a Warning Event `StandingAside`,
 *   and looks again every {@link OWNER_RECHECK_MS}; it takes the node only once that
 *   DaemonSet no longer exists (its release was uninstalled).
 * - It owns the node but another ipamd holds a guard (the previous pod of its own
 *   DaemonSet still stopping, a copy started by hand): it waits idle the same way (Event
 *   `AnotherIpamdRuns`), looking again every {@link GUARD_RECHECK_MS}.
 * Outside a DaemonSet a held guard ends the start (exit 1, one line), as before.
 */
import type { IpamdConfig } from '../config.js';
import { loadKubeConfig } from '../kube/config.js';
import type { KubeConfig } from '../kube/client.js';
import type { Logger } from '../log.js';
import type { CheckpointLock } from './checkpoint-lock.js';
import { GuardHeldError } from './guard-holder.js';
import { readInstanceIdentity, type InstanceIdentity } from './instance-identity.js';
import { askHolder, nodeGuardName } from './node-guard.js';
import { takeNodeGuards, type GuardConfig } from './node-guards.js';
import { claimNode } from './node-owner.js';
import { startStandby, type Standby } from './standby.js';

/** How often a DaemonSet standing aside looks at the owner record again (ms). */
export const OWNER_RECHECK_MS = 30_000;
/** How often an owner waiting for a held guard tries again (ms). */
export const GUARD_RECHECK_MS = 10_000;

type TakeConfig = GuardConfig &
  Pick<IpamdConfig, 'imdsEndpoint' | 'nodeName' | 'leaseNamespace'> & { daemonSet?: string | undefined };

/** The Kubernetes configuration for the owner record, or undefined (not a DaemonSet, or no API configured). */
function ownerApi(config: TakeConfig, log: Logger): KubeConfig | undefined {
  if (!config.daemonSet || !config.nodeName) return undefined;
  try {
    return loadKubeConfig().kc;
  } catch (e) {
    log.warn({ err: (e as Error).message }, 'no Kubernetes configuration: no owner record for this node');
    return undefined;
  }
}

/** Whether a standby may answer probes on our socket: only when the ipamd that runs the node serves another one. */
async function mayBindSocket(config: TakeConfig, id: InstanceIdentity): Promise<boolean> {
  const h = await askHolder(nodeGuardName(id), 1000);
  return typeof h === 'object' && h.socket !== config.socketPath;
}

/**
 * Takes the node for `config` (see the module docstring); resolves with the held guards.
 * `log` is the start-up logger (stdout: the log file is not open yet).
 * @throws Error when IMDS cannot be read, or a guard is held and ipamd is not a DaemonSet's.
 */
export async function takeNode(
  config: TakeConfig,
  log: Logger,
  o: { ownerRecheckMs?: number; guardRecheckMs?: number } = {},
): Promise<CheckpointLock> {
  const id = await readInstanceIdentity(config.imdsEndpoint, { warn: (l) => log.warn(l) });
  const kc = ownerApi(config, log);
  let standby: Standby | undefined;
  let said = '';
  const stand = async (reason: string, message: string) => {
    if (said === message) return;
    said = message;
    standby ??= await startStandby(config, log, { health: await mayBindSocket(config, id) });
    await standby.report({ reason, message, condition: false });
  };
  const pause = (ms: number) => new Promise((r) => setTimeout(r, ms)); // the re-check period, not a wait for an event
  let warned = '';
  try {
    for (;;) {
      if (kc) {
        const own = await claimNode({
          kc,
          node: config.nodeName!,
          me: config.daemonSet!,
          namespace: config.leaseNamespace,
        });
        if (own.kind === 'other') {
          const every = Math.round((o.ownerRecheckMs ?? OWNER_RECHECK_MS) / 1000);
          await stand(
            'StandingAside',
            `this node is owned by DaemonSet ${own.owner} (Lease ${config.leaseNamespace}/${own.lease}${own.since ? ` since ${own.since}` : ''}): this ipamd, of DaemonSet ${config.daemonSet}, steps aside for good: it manages nothing here and looks again every ${every} s, taking the node only once DaemonSet ${own.owner} no longer exists. One release per node: uninstall the extra one`,
          );
          await pause(o.ownerRecheckMs ?? OWNER_RECHECK_MS);
          continue;
        }
        if (own.kind === 'unknown' && own.why !== warned) {
          warned = own.why;
          log.warn(
            { reason: own.why },
            `the node's owner record could not be read or written (${own.why}): taking the node`,
          );
        }
        if (own.kind === 'mine' && own.took)
          log.info(
            { lease: own.lease, from: own.took },
            `DaemonSet ${own.took} no longer exists: this DaemonSet owns the node now`,
          );
      }
      try {
        return await takeNodeGuards(config, id);
      } catch (e) {
        if (!kc || !(e instanceof GuardHeldError)) throw e;
        const every = Math.round((o.guardRecheckMs ?? GUARD_RECHECK_MS) / 1000);
        await stand('AnotherIpamdRuns', `${e.message}; this ipamd waits, idle, and tries again every ${every} s`);
        await pause(o.guardRecheckMs ?? GUARD_RECHECK_MS);
      }
    }
  } finally {
    await standby?.close();
  }
}
