/**
 * Node-state metrics: the release gate (frozen and why), the restore evidence sources,
 * the EC2/IMDS reconcile (`awscni_reconcile_count{fn}`, `awscni_force_removed_ips`,
 * `awscni_force_removed_enis`, IMDS↔EC2 drift, held IPs EC2 no longer shows), free
 * addresses per subnet, the node's kernel settings (`eni_ipam_node_sysctl_ok{sysctl}`), start-up durations (`awscni_ipamd_startup_duration_seconds`,
 * `awscni_ipamd_node_initialization_duration_seconds`) and ipamd's own errors
 * (`awscni_ipamd_error_count{fn}`), actions in progress (`awscni_ipamd_action_inprogress{fn}`).
 */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { MetricsSources } from './sources.js';

/** Longest freeze reason kept as a label value. */
const MAX_REASON = 200;
/**
 * `fn` values of `awscni_ipamd_error_count` exported at 0 from the start (the pool
 * controller's failed grows by kind, its failed steps, failed reconciles), so a rule's
 * increase()/rate() sees their first error; others (rpc_<verb>) appear when they happen.
 */
const KNOWN_ERROR_FNS = [
  'grow_subnet_full',
  'grow_eni_limit',
  'grow_throttled',
  'grow_ec2_error',
  'pool_step',
  'reconcile',
];
/** Start-up buckets in seconds (discovery with EC2 retries can take a minute). */
const STARTUP_BUCKETS = [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

/** What one EC2/IMDS reconcile pass found and did (a subset of the reconciler's report). */
export interface ReconcileFacts {
  ok: boolean;
  adoptedEnis: string[];
  removedEnis?: string[];
  addedIps: string[];
  removedIps: string[];
  heldMissing: string[];
  imdsOnly: string[];
  imdsMissing: string[];
}

/** The hooks of the node-state metrics. */
export interface StateMetricHooks {
  /** Counts an error handled inside ipamd (`awscni_ipamd_error_count{fn}`), e.g. fn "pool_step", "reconcile". */
  ipamdError(fn: string): void;
  /** Feeds one reconcile pass: counters of what changed, the drift gauges. */
  reconciled(r: ReconcileFacts): void;
  /** Sets the free addresses EC2 reports for a subnet (DescribeSubnets, or 0 on an EC2 "subnet full" answer). */
  subnetFree(subnetId: string, free: number): void;
  /** Sets whether a subnet is marked exhausted for new ENIs (`eni_ipam_subnet_exhausted{subnet}` 1/0). */
  subnetExhausted(subnetId: string, exhausted: boolean): void;
  /** Records the start-up: seconds from process start to serving, and of node initialization. */
  started(p: { startupSeconds: number; nodeInitSeconds: number; withApiServer: boolean }): void;
  /** Marks an action in progress (`awscni_ipamd_action_inprogress{fn}`); call the result when it ends. */
  inProgress(fn: string): () => void;
}

/** Registers the node-state metrics on `registry`. */
export function registerStateMetrics(registry: Registry, src: () => MetricsSources | undefined): StateMetricHooks {
  const registers = [registry];
  const ipamdErr = new Counter({
    name: 'awscni_ipamd_error_count',
    help: 'The number of errors encountered in ipamd',
    labelNames: ['fn'],
    registers,
  });
  for (const fn of KNOWN_ERROR_FNS) ipamdErr.inc({ fn }, 0);
  const inProgress = new Gauge({
    name: 'awscni_ipamd_action_inprogress',
    help: 'The number of ipamd actions in progress',
    labelNames: ['fn'],
    registers,
  });
  const reconciled = reconcileMetrics(registers, ipamdErr);
  const subnet = new Gauge({
    name: 'eni_ipam_subnet_free_addresses',
    help: "Free addresses EC2 reports in each subnet of the node's ENIs (AvailableIpAddressCount; 0 after EC2 answered the subnet is full)",
    labelNames: ['subnet'],
    registers,
  });
  const subnetExhausted = new Gauge({
    name: 'eni_ipam_subnet_exhausted',
    help: 'Whether a subnet is marked exhausted for new ENIs (1: EC2 answered InsufficientFreeAddressesInSubnet or InsufficientCidrBlocks, the placement skips it for a while; 0: eligible again)',
    labelNames: ['subnet'],
    registers,
  });
  const startup = new Histogram({
    name: 'awscni_ipamd_startup_duration_seconds',
    help: 'The duration of ipamd start-up from process start to ready to serve CNI requests',
    labelNames: ['success', 'with_api_server', 'failure_reason'],
    buckets: STARTUP_BUCKETS,
    registers,
  });
  const nodeInit = new Histogram({
    name: 'awscni_ipamd_node_initialization_duration_seconds',
    help: 'The duration of node initialization (discovery, checkpoint restore, evidence) during ipamd start-up',
    labelNames: ['success'],
    buckets: STARTUP_BUCKETS,
    registers,
  });

  registerGateGauges(registers, src);

  return {
    ipamdError(fn) {
      ipamdErr.inc({ fn });
    },
    reconciled,
    subnetFree(subnetId, free) {
      subnet.set({ subnet: subnetId }, free);
    },
    subnetExhausted(subnetId, exhausted) {
      subnetExhausted.set({ subnet: subnetId }, exhausted ? 1 : 0);
    },
    started(p) {
      startup.observe(
        { success: 'true', with_api_server: String(p.withApiServer), failure_reason: '' },
        p.startupSeconds,
      );
      nodeInit.observe({ success: 'true' }, p.nodeInitSeconds);
    },
    inProgress(fn) {
      inProgress.inc({ fn });
      let done = false;
      return () => {
        if (!done) inProgress.dec({ fn });
        done = true;
      };
    },
  };
}

/**
 * The EC2/IMDS reconcile's metrics (`awscni_reconcile_count{fn}`, pass results, forced
 * removals, IMDS↔EC2 drift, held IPs EC2 no longer shows); returns the hook fed once per pass.
 */
function reconcileMetrics(registers: Registry[], ipamdErr: Counter<'fn'>): (r: ReconcileFacts) => void {
  const reconcile = new Counter({
    name: 'awscni_reconcile_count',
    help: 'The number of ENI and IP/prefix changes the EC2 reconcile made, by kind',
    labelNames: ['fn'],
    registers,
  });
  const passes = new Counter({
    name: 'eni_ipam_reconcile_passes_total',
    help: 'EC2/IMDS reconcile passes, by result (ok, failed: the describe failed and nothing changed)',
    labelNames: ['result'],
    registers,
  });
  const forceIps = new Counter({
    name: 'awscni_force_removed_ips',
    help: 'IPs (or /28 prefixes) removed from the datastore because EC2 no longer shows them; never ones pods hold (those are kept, see eni_ipam_ec2_missing_held_ips)',
    registers,
  });
  const forceEnis = new Counter({
    name: 'awscni_force_removed_enis',
    help: 'ENIs removed from the datastore because EC2 no longer shows them attached',
    registers,
  });
  const drift = new Gauge({
    name: 'eni_ipam_imds_ec2_drift_addresses',
    help: 'Addresses IMDS and EC2 disagree on at the last reconcile, by kind (imds_only: IMDS lists, EC2 does not; imds_missing: EC2 shows, IMDS does not)',
    labelNames: ['kind'],
    registers,
  });
  drift.set({ kind: 'imds_only' }, 0);
  drift.set({ kind: 'imds_missing' }, 0);
  const heldMissing = new Gauge({
    name: 'eni_ipam_ec2_missing_held_ips',
    help: 'IPs pods hold that EC2 no longer shows on our ENIs at the last reconcile (kept, never dropped while held; look at them)',
    registers,
  });
  return (r: ReconcileFacts): void => {
    passes.inc({ result: r.ok ? 'ok' : 'failed' });
    if (!r.ok) {
      ipamdErr.inc({ fn: 'reconcile' });
      return;
    }
    const count = (fn: string, n: number) => {
      if (n > 0) reconcile.inc({ fn }, n);
    };
    count('eniReconcileAdd', r.adoptedEnis.length);
    count('eniReconcileDel', r.removedEnis?.length ?? 0);
    count('eniIPPoolReconcileAdd', r.addedIps.length);
    count('eniIPPoolReconcileDel', r.removedIps.length);
    if (r.removedIps.length) forceIps.inc(r.removedIps.length);
    if (r.removedEnis?.length) forceEnis.inc(r.removedEnis.length);
    drift.set({ kind: 'imds_only' }, r.imdsOnly.length);
    drift.set({ kind: 'imds_missing' }, r.imdsMissing.length);
    heldMissing.set(r.heldMissing.length);
  };
}

/** The gauges read at scrape time: node sysctls, the release gate and why, evidence sources, the brake. */
function registerGateGauges(registers: Registry[], src: () => MetricsSources | undefined): void {
  new Gauge({
    name: 'eni_ipam_node_sysctl_ok',
    help: '1 when a node kernel setting ipamd needs is right, 0 when wrong or unreadable (set by the privileged init container)',
    labelNames: ['sysctl'],
    registers,
    collect() {
      this.reset();
      for (const c of src()?.sysctls?.() ?? []) this.set({ sysctl: c.sysctl }, c.ok ? 1 : 0);
    },
  });
  new Gauge({
    name: 'eni_ipam_releases_frozen',
    help: '1 while releases (unassign, detach, delete) are frozen, else 0',
    registers,
    collect() {
      this.set(src()?.gate.frozen ? 1 : 0);
    },
  });
  new Gauge({
    name: 'eni_ipam_release_freeze_reason',
    help: 'One series per reason releases are frozen (value 1), labelled by source and reason',
    labelNames: ['source', 'reason'],
    registers,
    collect() {
      this.reset();
      for (const r of src()?.gate.describe() ?? []) {
        const i = r.indexOf(': ');
        const source = i < 0 ? r : r.slice(0, i);
        const reason = i < 0 ? '' : r.slice(i + 2);
        this.set({ source, reason: reason.length > MAX_REASON ? `${reason.slice(0, MAX_REASON)}…` : reason }, 1);
      }
    },
  });
  new Gauge({
    name: 'eni_ipam_evidence_source_state',
    help: 'State of each restore evidence source at the last pass (value 1 on its state): ok, unreadable, or suspect (answered, but implausibly: its silence is not believed and releases freeze)',
    labelNames: ['source', 'state'],
    registers,
    collect() {
      this.reset();
      for (const [source, state] of Object.entries(src()?.evidence?.()?.sources ?? {})) this.set({ source, state }, 1);
    },
  });
  new Gauge({
    name: 'eni_ipam_node_condition_synced',
    help: 'Kubernetes reporting on: 1 when the eni-ipam.io/IPAllocatable condition on the Node is what ipamd computed, 0 while ipamd cannot read or write it (RBAC, API down: the condition and its lastHeartbeatTime on the Node are stale)',
    registers,
    collect() {
      this.reset();
      const c = src()?.nodeCondition?.();
      if (c) this.set(c.synced ? 1 : 0);
    },
  });
  new Gauge({
    name: 'eni_ipam_release_brake_held',
    help: "1 when the last evidence pass would have released more than max(2, 10 %) of the allocations on a single source's word and released nothing, else 0",
    registers,
    collect() {
      this.set(src()?.evidence?.()?.brakeHeld ? 1 : 0);
    },
  });
}
