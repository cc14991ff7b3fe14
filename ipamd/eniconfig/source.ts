/**
 * The ENIConfig source (custom networking): reads and WATCHES this node's object
 * (`/api/v1/nodes`, `fieldSelector=metadata.name=<node>`) and the ENIConfig objects
 * (`/apis/crd.k8s.amazonaws.com/v1alpha1/eniconfigs`) through @kubernetes/client-node's
 * ListWatch (list, then watch from the list's resourceVersion, relist on 410), and keeps
 * the node's {@link EniConfigSelection} current with the pure {@link selectEniConfig}.
 *
 * Safety: a side that cannot be read (no configuration, connection refused, RBAC 403, a
 * list that does not answer within `listTimeoutMs`, a watch that fails) makes the
 * selection `unknown` until a list succeeds again; `unknown` never turns into "use the
 * node's subnet" (no ENI is created). Failed sides are retried with back-off (1 s
 * doubling to 30 s); each failure is logged once until the side recovers.
 */
import {
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
} from '../kube/client.js';
import type { EniConfigSelection } from '../controller/eni-lifecycle/placement-types.js';
import type { Logger } from '../log.js';
import { WatchedList } from '../kube/watched-list.js';
import { selectEniConfig, type EniConfigFacts, type NodeFacts, type SelectionKeys } from './select.js';

/** API group, version and plural of the ENIConfig CRD (amazon-vpc-cni-k8s charts/aws-vpc-cni/crds). */
export const ENI_CONFIG_API = { group: 'crd.k8s.amazonaws.com', version: 'v1alpha1', plural: 'eniconfigs' } as const;

/** Options of {@link EniConfigSource}; times in ms. */
export interface EniConfigSourceOptions {
  kc: KubeConfig;
  nodeName: string;
  keys: SelectionKeys;
  log: Logger;
  /** Deadline of one list call (default 10 000). */
  listTimeoutMs?: number;
  /** First retry delay after a failure (default 1000; doubles up to `retryMaxMs`). */
  retryMinMs?: number;
  /** Longest retry delay (default 30 000). */
  retryMaxMs?: number;
}

/** Keeps this node's ENIConfig selection current; see the module docstring. */
export class EniConfigSource {
  private readonly node: WatchedList;
  private readonly configs: WatchedList;
  private selection: EniConfigSelection;
  private readonly listeners: Array<(s: EniConfigSelection) => void> = [];

  constructor(private readonly o: EniConfigSourceOptions) {
    const common = {
      listTimeoutMs: o.listTimeoutMs ?? 10_000,
      retryMinMs: o.retryMinMs ?? 1000,
      retryMaxMs: o.retryMaxMs ?? 30_000,
      log: o.log,
      source: 'ENIConfig source',
      whileUnreadable: 'no ENI is created meanwhile',
      changed: () => this.recompute(),
    };
    const core = o.kc.makeApiClient(CoreV1Api);
    const custom = o.kc.makeApiClient(CustomObjectsApi);
    const fieldSelector = `metadata.name=${o.nodeName}`;
    this.node = new WatchedList(
      o.kc,
      `node ${o.nodeName}`,
      '/api/v1/nodes',
      () => core.listNode({ fieldSelector }) as Promise<KubernetesListObject<KubernetesObject>>,
      fieldSelector,
      common,
    );
    const { group, version, plural } = ENI_CONFIG_API;
    this.configs = new WatchedList(
      o.kc,
      `ENIConfigs (${plural}.${group}/${version})`,
      `/apis/${group}/${version}/${plural}`,
      () =>
        custom.listClusterCustomObject({ group, version, plural }) as Promise<KubernetesListObject<KubernetesObject>>,
      undefined,
      common,
    );
    this.selection = this.compute();
  }

  /** Starts reading and watching (the selection is `unknown` until both are read). */
  start(): void {
    this.node.start();
    this.configs.start();
  }

  /** Stops the watches. */
  stop(): void {
    this.node.stop();
    this.configs.stop();
  }

  /** The selection now (memory only; never throws). */
  current(): EniConfigSelection {
    return this.selection;
  }

  /** Calls `fn` (synchronously, must not throw) each time the selection changes. */
  onChange(fn: (s: EniConfigSelection) => void): void {
    this.listeners.push(fn);
  }

  private compute(): EniConfigSelection {
    const n = this.node.read();
    let node: NodeFacts;
    if ('unreadable' in n) node = n;
    else {
      const obj = n.objects.find((x) => x.metadata?.name === this.o.nodeName);
      node = obj
        ? { labels: obj.metadata?.labels ?? {}, annotations: obj.metadata?.annotations ?? {} }
        : { unreadable: `node ${this.o.nodeName} does not exist` };
    }
    const c = this.configs.read();
    const configs: EniConfigFacts =
      'unreadable' in c ? c : { byName: new Map(c.objects.map((x) => [x.metadata?.name ?? '', x as unknown])) };
    return selectEniConfig(this.o.keys, node, configs);
  }

  private recompute(): void {
    const next = this.compute();
    if (JSON.stringify(next) === JSON.stringify(this.selection)) return;
    const prev = this.selection;
    this.selection = next;
    const level = next.state === 'ok' ? 'info' : 'warn';
    this.o.log[level](
      {
        state: next.state,
        ...(next.state !== 'off' && next.name !== undefined ? { eniConfig: next.name } : {}),
        ...(next.state !== 'off' ? { selectedBy: next.selectedBy } : {}),
        ...(next.state === 'ok' ? { subnets: next.subnetIds, securityGroups: next.securityGroupIds } : {}),
        ...(next.state !== 'ok' && next.state !== 'off' ? { reason: next.reason } : {}),
        was: prev.state,
      },
      'ENIConfig selection changed (applies to ENIs created from now on)',
    );
    for (const fn of this.listeners) fn(next);
  }
}

/**
 * A selection holder for custom networking that cannot read the API at all (no
 * MY_NODE_NAME, no Kubernetes configuration): always `unknown` with `reason`.
 */
export function unreadableSelection(keys: SelectionKeys, reason: string): EniConfigSelection {
  return {
    state: 'unknown',
    selectedBy: `the node's annotation ${keys.annotationDef} or label ${keys.labelDef}`,
    reason,
  };
}
