/**
 * What each part of ipamd provides, by part name (the registry the parts runner checks
 * `needs` against: lifecycle/runner.ts), and the daemon's phase, the one piece of state
 * parts share across time: serving yet, stopping, and the two parts started late (the
 * Kubernetes reporter, the ENI lifecycle) that earlier parts read once they exist.
 */
import type { CheckpointState } from '../startup/checkpoint-state.js';
import type { CloudAnswerWatch } from '../cloud/cloud-answers.js';
import type { CniExecServer } from '../cni-exec/server.js';
import type { DelSpool } from '../cni-exec/spool-applier.js';
import type { AdoptionPlan } from '../startup/adopt.js';
import type { Datastore } from '../datastore/datastore.js';
import type { EniConfigWiring } from '../startup/eniconfig-wiring.js';
import type { NodeSchedulePause } from '../startup/node-schedule-wiring.js';
import type { CooldownEvidenceHandle } from '../startup/cooldown-evidence-wiring.js';
import type { EniLifecycle } from '../controller/eni-lifecycle/start.js';
import type { Evidence } from '../restore/evidence.js';
import type { HttpEndpoints } from '../observability/http-endpoints.js';
import type { InventoryCacheHandle } from '../startup/fast-start.js';
import type { IpamdMetrics } from '../observability/metrics.js';
import type { IpamService } from '../service/ipam-service.js';
import type { FamilyService } from '../service/family-service.js';
import type { KernelSource } from '../restore/kernel-source.js';
import type { KubeReporter } from '../observability/kube-reporter.js';
import type { LazyKubeReporting } from '../startup/kube-reporting-start.js';
import type { NodeInventory } from '../startup/discover.js';
import type { PluginLogFiles } from '../observability/log-files.js';
import type { PoolWiring } from '../startup/pool-wiring.js';
import type { ReleaseGate } from '../controller/release/release-gate.js';
import type { RpcServer } from '../rpc/server.js';
import type { NpaConfigServer } from '../rpc/npa-config-server.js';
import type { StalledParts } from '../observability/stalled-parts.js';
import type { startHostNetworkSync } from '../controller/host-network-sync.js';
import type { statusDocument } from './status-doc.js';
import type { Ipv6CheckpointWriter } from '../checkpoint/ipv6-file.js';
import type { Ipv6Allocations } from '../datastore/ipv6-allocations.js';

/** The daemon's phase; see the module docstring. */
export class DaemonPhase {
  /** Set when the stop begins; a failing ADD then says ipamd is restarting. */
  stopping = false;
  /** True once ipamd serves (the "ipamd serving" line). */
  isServing = false;
  /** Resolves once ipamd serves: what serving does not need waits for it. */
  readonly serving: Promise<void>;
  /** Events, node condition, taint: set by the kube-reporting part, undefined before. */
  reporting: LazyKubeReporting | undefined;
  /** The ENI lifecycle, set by the pool-loop part (undefined before, or when provisioning is off). */
  lifecycle: EniLifecycle | undefined;
  private markServed = (): void => undefined;

  constructor() {
    this.serving = new Promise<void>((r) => (this.markServed = r));
  }

  /** Marks ipamd serving (resolves {@link serving}). */
  served(): void {
    this.isServing = true;
    this.markServed();
  }

  /** The Kubernetes reporter, once started. */
  reporter(): KubeReporter | undefined {
    return this.reporting?.reporter();
  }
}

/** Host networking once synced (undefined with ENI_IPAM_HOST_NETWORK=false). */
export type HostNet = Awaited<ReturnType<typeof startHostNetworkSync>> | undefined;

/** A close that runs once: later calls share the first (a drain and a part's own stop). */
export type CloseOnce = (graceMs: number) => Promise<void>;

/** `/v1/status`'s document. */
export type StatusDoc = ReturnType<typeof statusDocument> & { stalled: ReturnType<StalledParts['list']> };

/** What the `ipv6` part provides in `ipv6`/`dual` mode: the /80's allocations, their checkpoint, the primary ENI. */
export interface Ipv6Part {
  v6: Ipv6Allocations;
  writer: Ipv6CheckpointWriter;
  primaryEniId: string;
}

/** What each part provides, by name (see the parts in daemon.ts). */
export interface DaemonParts {
  metrics: { metrics: IpamdMetrics; throttle: CloudAnswerWatch['throttle']; ec2Hooks: CloudAnswerWatch['ec2Hooks'] };
  phase: DaemonPhase;
  node: { inv: NodeInventory; bootId: string; unit: 'ip' | 'prefix' };
  /** The network policy agent's GetNetworkPolicyConfigs (NETWORK_POLICY_ENFORCING_MODE). */
  'npa-config': NpaConfigServer | undefined;
  datastore: { ds: Datastore; adoption: AdoptionPlan };
  'release-gate': ReleaseGate;
  'inventory-cache': InventoryCacheHandle;
  checkpoint: CheckpointState;
  'del-spool': DelSpool;
  'aws-node-import': undefined;
  kernel: KernelSource;
  evidence: { evidence: Evidence; nodeInitMs: number };
  eniconfig: EniConfigWiring;
  /** AWS_MANAGE_ENIS_NON_SCHEDULABLE: why the pool is paused on a cordoned node, if it is. */
  'node-schedule': NodeSchedulePause;
  /** ENI_IPAM_COOLDOWN_EVIDENCE: the EndpointSlice watch that may end a cooldown early. */
  'cooldown-evidence': CooldownEvidenceHandle;
  'host-network': HostNet;
  pool: PoolWiring;
  service: IpamService;
  /** `ipv6`/`dual` mode: the /80 and its allocations; undefined in `ipv4` mode. */
  ipv6: Ipv6Part | undefined;
  'egress-v4': undefined;
  /** `ipv6`/`dual` mode: the family-aware request path (undefined in `ipv4` mode). */
  family: { service: FamilyService; primaryEniId: string } | undefined;
  'quarantine-check': undefined;
  'metrics-sources': undefined;
  status: { status: () => StatusDoc; stalled: StalledParts };
  'http-endpoints': HttpEndpoints;
  rpc: { rpc: RpcServer; shutdown: CloseOnce };
  'plugin-logs': PluginLogFiles;
  'cni-exec': { server: CniExecServer | undefined; close: CloseOnce };
  'spool-watch': undefined;
  'cni-install': undefined;
  'stop-grace': { arm(): void };
  'pool-loop': undefined;
  drain: undefined;
  'kube-reporting': LazyKubeReporting;
  'eniconfig-follow': undefined;
  serving: undefined;
}
