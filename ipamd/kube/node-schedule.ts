/**
 * Whether this node is unschedulable (cordoned), for AWS_MANAGE_ENIS_NON_SCHEDULABLE
 * (docs/configuration.md): this node's object kept listed and watched
 * (`/api/v1/nodes`, `fieldSelector=metadata.name=<node>`, watched-list.ts). As aws-node
 * (pkg/ipamd/ipamd.go `isNodeNonSchedulable`), the node counts as unschedulable when it
 * carries the taint `node.kubernetes.io/unschedulable:NoSchedule`, which the node
 * lifecycle controller puts on a cordoned node; a node that cannot be read counts as
 * schedulable (aws-node: "Failed to get node while determining schedulability" → false).
 */
import { CoreV1Api, type KubeConfig, type KubernetesListObject, type KubernetesObject } from './client.js';
import type { Logger } from '../log.js';
import { WatchedList } from './watched-list.js';

/** The taint of a cordoned node (k8s.io/api core/v1 TaintNodeUnschedulable, effect NoSchedule). */
export const UNSCHEDULABLE_TAINT = { key: 'node.kubernetes.io/unschedulable', effect: 'NoSchedule' } as const;

/** True when `node` carries {@link UNSCHEDULABLE_TAINT} (key and effect, any value, as Taint.MatchTaint). Pure. */
export function hasUnschedulableTaint(node: { spec?: { taints?: Array<{ key?: string; effect?: string }> } }): boolean {
  return (node.spec?.taints ?? []).some(
    (t) => t.key === UNSCHEDULABLE_TAINT.key && t.effect === UNSCHEDULABLE_TAINT.effect,
  );
}

/** Options of {@link NodeScheduleSource}. */
export interface NodeScheduleSourceOptions {
  kc: KubeConfig;
  nodeName: string;
  log: Logger;
  /** Called (synchronously, must not throw) after every change of the node or of its readability. */
  changed?: () => void;
}

/** Keeps whether this node is unschedulable; see the module docstring. */
export class NodeScheduleSource {
  private readonly node: WatchedList;

  constructor(private readonly o: NodeScheduleSourceOptions) {
    const core = o.kc.makeApiClient(CoreV1Api);
    const fieldSelector = `metadata.name=${o.nodeName}`;
    this.node = new WatchedList(
      o.kc,
      `node ${o.nodeName}`,
      '/api/v1/nodes',
      () => core.listNode({ fieldSelector }) as Promise<KubernetesListObject<KubernetesObject>>,
      fieldSelector,
      {
        listTimeoutMs: 10_000,
        retryMinMs: 1000,
        retryMaxMs: 30_000,
        log: o.log,
        source: 'node schedulability (AWS_MANAGE_ENIS_NON_SCHEDULABLE)',
        whileUnreadable: 'the node counts as schedulable meanwhile, as aws-node',
        changed: () => o.changed?.(),
      },
    );
  }

  /** Starts listing and watching the node (idempotent). */
  start(): void {
    this.node.start();
  }

  /** Stops the watch. */
  stop(): void {
    this.node.stop();
  }

  /** True while the node carries the unschedulable taint; false when it does not, or cannot be read. Memory only. */
  unschedulable(): boolean {
    const r = this.node.read();
    if ('unreadable' in r) return false;
    const obj = r.objects.find((x) => x.metadata?.name === this.o.nodeName);
    return obj !== undefined && hasUnschedulableTaint(obj as { spec?: { taints?: [] } });
  }
}
