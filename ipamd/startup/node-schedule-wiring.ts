/**
 * Start-up step of ipamd: AWS_MANAGE_ENIS_NON_SCHEDULABLE (docs/configuration.md). With it
 * false (the default, as aws-node) and MY_NODE_NAME set, this node is watched
 * (kube/node-schedule.ts) and, while it is unschedulable (cordoned), the pool neither
 * grows nor frees an ENI (pool-controller.ts `managementPaused`), as aws-node's
 * `isENIAttachmentAllowed` and `tryFreeENI`. Each change is logged once. The Kubernetes
 * client is imported in the background once ipamd serves (`after`), as the pod source's:
 * until then, and whenever the node cannot be read, the node counts as schedulable.
 */
import type { IpamdConfig } from '../config.js';
import type { Logger } from '../log.js';
import type { NodeScheduleSource } from '../kube/node-schedule.js';

/** The pause as the pool uses it. */
export interface NodeSchedulePause {
  /** Why the pool must not grow or free an ENI now (the node is cordoned), or undefined. Memory only. */
  paused(): string | undefined;
  /** Calls `fn` (must not throw) when {@link paused} may have changed. */
  onChange(fn: () => void): void;
  stop(): void;
}

/** The reason {@link NodeSchedulePause.paused} gives for `nodeName`. */
export function cordonedReason(nodeName: string): string {
  return (
    `node ${nodeName} is unschedulable (taint node.kubernetes.io/unschedulable:NoSchedule) and ` +
    'AWS_MANAGE_ENIS_NON_SCHEDULABLE is false: no address is added and no ENI is created or freed until it is ' +
    'schedulable again, as aws-node does'
  );
}

/**
 * Starts watching this node when the setting asks for it (never throws; `after` settles
 * when the client may load, e.g. once ipamd serves).
 */
export function startNodeSchedule(
  config: Pick<IpamdConfig, 'manageEnisNonSchedulable' | 'nodeName'>,
  log: Logger,
  after: Promise<unknown>,
): NodeSchedulePause {
  const listeners: Array<() => void> = [];
  const off: NodeSchedulePause = { paused: () => undefined, onChange: () => undefined, stop: () => undefined };
  if (config.manageEnisNonSchedulable) return off;
  const nodeName = config.nodeName;
  if (!nodeName) {
    log.info('MY_NODE_NAME is not set: a cordoned node cannot be told apart; the pool is managed as on any node');
    return off;
  }
  let source: NodeScheduleSource | undefined;
  let stopped = false;
  let was = false;
  const changed = () => {
    const now = source?.unschedulable() ?? false;
    if (now !== was) {
      if (now) log.warn({ node: nodeName }, cordonedReason(nodeName));
      else log.info({ node: nodeName }, 'node schedulable again: the pool is managed again');
      was = now;
    }
    for (const fn of listeners) fn();
  };
  const load = async () => {
    const [{ NodeScheduleSource }, { loadKubeConfig }] = await Promise.all([
      import('../kube/node-schedule.js'),
      import('../kube/config.js'),
    ]);
    if (stopped) return;
    const src = new NodeScheduleSource({ kc: loadKubeConfig().kc, nodeName, log, changed });
    source = src;
    src.start();
  };
  void after
    .catch(() => undefined)
    .then(load)
    .catch((e: Error) =>
      log.warn(
        { err: e.message },
        'cannot watch the node for AWS_MANAGE_ENIS_NON_SCHEDULABLE: it counts as schedulable (the pool is managed)',
      ),
    );
  return {
    paused: () => (source?.unschedulable() ? cordonedReason(nodeName) : undefined),
    onChange: (fn) => listeners.push(fn),
    stop: () => {
      stopped = true;
      source?.stop();
    },
  };
}
