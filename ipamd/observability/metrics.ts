/**
 * ipamd's Prometheus metrics (DESIGN §3 "Metrics"), on a registry of their own.
 *
 * Names and labels follow amazon-vpc-cni-k8s where the concept is the same
 * (`awscni_*`: `awscni_ec2api_req_count{fn}`, `awscni_ec2api_error_count{fn}`,
 * `awscni_aws_api_error_count{api,error}`, `awscni_aws_api_latency_ms{api,error,status}` — a
 * summary without quantiles, `error` "true"/"false", `status` the HTTP status —, the IP/ENI
 * gauges, `awscni_add_ip_req_count`, `awscni_del_ip_req_count`, ...). Ours are prefixed
 * `eni_ipam_` and use base units (seconds): ADD/DEL latency histograms, EC2 latency per
 * action, per-action/outcome EC2 counters, retries, budget waits, IPs per state (cooling
 * included), waiting ADDs, and the release gate (frozen 1/0 and its reasons).
 *
 * Gauges are sampled from the datastore and the release gate at scrape time
 * (prom-client `collect()`), so they can never drift from the state they describe.
 * Counters are fed by hooks: {@link IpamdMetrics.ec2} (spread into `Ec2ApiOptions`),
 * {@link IpamdMetrics.observeRpc} (RpcServer `observe`), and the small named hooks.
 */
import { readFileSync } from 'node:fs';
import { Counter, Gauge, Histogram, Registry, Summary } from 'prom-client';
import type { Ec2CallInfo } from '../cloud/ec2.js';
import type { DatastoreCounts } from '../datastore/types.js';

/** What the scrape-time gauges read. Structural, so tests may pass plain objects. */
export interface MetricsSources {
  ds: { counts(now: number): DatastoreCounts };
  gate: { readonly frozen: boolean; describe(): string[] };
  pool?: { readonly waiting: number };
  /** ENI limit of the node (MAX_ENI capped by the instance) and the addresses those ENIs can hold for pods. */
  limits?: () => { maxEni: number; ipMax: number };
  /** Node kernel settings ipamd checks (network/sysctl.ts): `eni_ipam_node_sysctl_ok{sysctl}`. */
  sysctls?: () => Array<{ sysctl: string; ok: boolean }>;
  /** Clock in ms (default Date.now). */
  now?: () => number;
}

/** Options of {@link createMetrics}: sources may be given now or later with `setSources`. */
export interface CreateMetricsOptions extends Partial<MetricsSources> {
  /** Build version for `awscni_build_info` (default: this package's version). */
  version?: string;
}

/** Hooks to spread into `Ec2ApiOptions` (`observe`, `onRetry`, `onWait`). */
export interface Ec2MetricHooks {
  observe(action: string, outcome: string, ms: number, info?: Ec2CallInfo): void;
  onRetry(action: string, code: string, attempt: number, delayMs: number): void;
  onWait(action: string, waitMs: number): void;
}

/** The metrics of one ipamd. */
export interface IpamdMetrics {
  readonly registry: Registry;
  /** EC2 hooks: `new Ec2Api({ ...opts, ...metrics.ec2 })`. */
  readonly ec2: Ec2MetricHooks;
  /** RpcServer `observe`: verb (add, del, status, gc, check), outcome ("ok" or a gRPC status name), latency ms. */
  observeRpc(verb: string, outcome: string, ms: number): void;
  /** Counts an error handled inside ipamd (`awscni_ipamd_error_count{fn}`), e.g. fn "pool_step". */
  ipamdError(fn: string): void;
  /** Counts a reconcile pass (`awscni_reconcile_count{fn}`), e.g. fn "ec2", "imds", "evidence". */
  reconciled(fn: string): void;
  /** Counts addresses dropped from the datastore because EC2 no longer lists them (`awscni_force_removed_ips`). */
  forceRemovedIps(n: number): void;
  /** Sets (or replaces) what the gauges read; gauges report nothing/0 until set. */
  setSources(s: MetricsSources): void;
  /** The exposition text (Prometheus text format 0.0.4). */
  text(): Promise<string>;
}

/** Latency buckets of ADD/DEL in seconds: memory-served ADDs take ~1 ms, waits up to ADD's 10 s bound. */
const RPC_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
/** Latency buckets of one EC2 attempt in seconds. */
const EC2_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
/** Longest freeze reason kept as a label value. */
const MAX_REASON = 200;

/** This package's version from its package.json (dist/ipamd/observability → 3 levels up; source → 2), or "unknown". */
export function packageVersion(): string {
  for (const rel of ['../../../package.json', '../../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(rel, import.meta.url), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'eni-ipam' && pkg.version) return pkg.version;
    } catch { /* try the next */ }
  }
  return 'unknown';
}

/**
 * Creates the metrics on a fresh registry (several ipamds may live in one process).
 * Never throws for missing sources: gauges stay at 0 until {@link IpamdMetrics.setSources}.
 */
export function createMetrics(o: CreateMetricsOptions = {}): IpamdMetrics {
  const registry = new Registry();
  const registers = [registry];
  let src: MetricsSources | undefined = o.ds && o.gate ? { ds: o.ds, gate: o.gate, ...(o.pool ? { pool: o.pool } : {}), ...(o.limits ? { limits: o.limits } : {}), ...(o.now ? { now: o.now } : {}) } : undefined;
  const counts = (): DatastoreCounts | undefined => src?.ds.counts((src.now ?? Date.now)());
  const sampled = (name: string, help: string, pick: (c: DatastoreCounts) => number) => new Gauge({
    name, help, registers,
    collect() {
      const c = counts();
      this.set(c ? pick(c) : 0);
    },
  });

  // ---- amazon-vpc-cni-k8s names ----
  sampled('awscni_total_ip_addresses', 'The total number of IP addresses', (c) => c.total);
  sampled('awscni_assigned_ip_addresses', 'The number of IP addresses assigned to pods', (c) => c.assigned);
  sampled('awscni_eni_allocated', 'The number of ENIs allocated', (c) => c.enis);
  new Gauge({ name: 'awscni_eni_max', help: 'The maximum number of ENIs that can be attached to the instance, accounting for MAX_ENI', registers, collect() { this.set(src?.limits?.().maxEni ?? 0); } });
  new Gauge({ name: 'awscni_ip_max', help: 'The maximum number of IP addresses that can be allocated to the instance', registers, collect() { this.set(src?.limits?.().ipMax ?? 0); } });
  const addReq = new Counter({ name: 'awscni_add_ip_req_count', help: 'The number of add IP address requests', registers });
  const delReq = new Counter({ name: 'awscni_del_ip_req_count', help: 'The number of delete IP address requests', registers });
  const noIp = new Gauge({ name: 'awscni_no_available_ip_addresses', help: 'The number of pod IP assignments that failed because no IP address was available', registers });
  const ipamdErr = new Counter({ name: 'awscni_ipamd_error_count', help: 'The number of errors encountered in ipamd', labelNames: ['fn'], registers });
  const reconcile = new Counter({ name: 'awscni_reconcile_count', help: 'The number of times ipamd reconciled its state', labelNames: ['fn'], registers });
  const forceRemoved = new Counter({ name: 'awscni_force_removed_ips', help: 'The number of IPs removed from the datastore because EC2 no longer lists them', registers });
  const ec2Req = new Counter({ name: 'awscni_ec2api_req_count', help: 'The number of requests made to EC2 APIs by CNI', labelNames: ['fn'], registers });
  const ec2Err = new Counter({ name: 'awscni_ec2api_error_count', help: 'The number of failed EC2 APIs requests', labelNames: ['fn'], registers });
  const awsErr = new Counter({ name: 'awscni_aws_api_error_count', help: 'The number of times AWS API returns an error', labelNames: ['api', 'error'], registers });
  const awsLatency = new Summary({ name: 'awscni_aws_api_latency_ms', help: 'AWS API call latency in ms', labelNames: ['api', 'error', 'status'], percentiles: [], registers });
  const build = new Gauge({ name: 'awscni_build_info', help: 'The CNI build information', labelNames: ['version', 'nodeversion'], registers });
  build.set({ version: o.version ?? packageVersion(), nodeversion: process.version }, 1);

  // ---- ours ----
  const ipsByState = new Gauge({
    name: 'eni_ipam_ip_addresses', help: 'Secondary IPs on the node by state (available, assigned, cooling, releasing, unverified)', labelNames: ['state'], registers,
    collect() {
      const c = counts();
      for (const state of ['available', 'assigned', 'cooling', 'releasing', 'unverified'] as const) this.set({ state }, c ? c[state] : 0);
    },
  });
  void ipsByState;
  sampled('eni_ipam_cooling_ip_addresses', 'Released IPs still in IP_COOLDOWN_PERIOD: neither available nor assigned', (c) => c.cooling);
  new Gauge({
    name: 'eni_ipam_node_sysctl_ok', help: '1 when a node kernel setting ipamd needs is right, 0 when wrong or unreadable (set by the privileged init container)', labelNames: ['sysctl'], registers,
    collect() { this.reset(); for (const c of src?.sysctls?.() ?? []) this.set({ sysctl: c.sysctl }, c.ok ? 1 : 0); },
  });
  new Gauge({ name: 'eni_ipam_waiting_adds', help: 'ADDs waiting for the pool to refill', registers, collect() { this.set(src?.pool?.waiting ?? 0); } });
  new Gauge({ name: 'eni_ipam_releases_frozen', help: '1 while releases (unassign, detach, delete) are frozen, else 0', registers, collect() { this.set(src?.gate.frozen ? 1 : 0); } });
  new Gauge({
    name: 'eni_ipam_release_freeze_reason', help: 'One series per reason releases are frozen (value 1), labelled by source and reason', labelNames: ['source', 'reason'], registers,
    collect() {
      this.reset();
      for (const r of src?.gate.describe() ?? []) {
        const i = r.indexOf(': ');
        const source = i < 0 ? r : r.slice(0, i);
        const reason = i < 0 ? '' : r.slice(i + 2);
        this.set({ source, reason: reason.length > MAX_REASON ? `${reason.slice(0, MAX_REASON)}…` : reason }, 1);
      }
    },
  });
  const addLatency = new Histogram({ name: 'eni_ipam_add_latency_seconds', help: 'AddNetwork latency (seconds), by outcome', labelNames: ['outcome'], buckets: RPC_BUCKETS, registers });
  const delLatency = new Histogram({ name: 'eni_ipam_del_latency_seconds', help: 'DelNetwork latency (seconds), by outcome', labelNames: ['outcome'], buckets: RPC_BUCKETS, registers });
  const rpcReq = new Counter({ name: 'eni_ipam_rpc_requests_total', help: 'gRPC requests by verb and outcome', labelNames: ['verb', 'outcome'], registers });
  const ec2Calls = new Counter({ name: 'eni_ipam_ec2_requests_total', help: 'EC2 attempts by action and outcome ("ok" or the EC2 error code)', labelNames: ['action', 'outcome'], registers });
  const ec2Latency = new Histogram({ name: 'eni_ipam_ec2_request_duration_seconds', help: 'Latency of one EC2 attempt (seconds), by action', labelNames: ['action'], buckets: EC2_BUCKETS, registers });
  const ec2Throttled = new Counter({ name: 'eni_ipam_ec2_throttled_total', help: 'EC2 attempts refused by throttling (RequestLimitExceeded and the like), by action', labelNames: ['action'], registers });
  const ec2Retries = new Counter({ name: 'eni_ipam_ec2_retries_total', help: 'EC2 attempts retried after a failure, by action and error code', labelNames: ['action', 'code'], registers });
  const ec2Waits = new Counter({ name: 'eni_ipam_ec2_budget_waits_total', help: 'EC2 attempts that waited for the node-local token bucket or a back-off hold, by action', labelNames: ['action'], registers });
  const ec2WaitSec = new Counter({ name: 'eni_ipam_ec2_budget_wait_seconds_total', help: 'Seconds EC2 attempts waited for the token bucket or a back-off hold, by action', labelNames: ['action'], registers });

  const ec2: Ec2MetricHooks = {
    observe(action, outcome, ms, info) {
      const failed = outcome !== 'ok';
      ec2Req.inc({ fn: action });
      ec2Calls.inc({ action, outcome });
      ec2Latency.observe({ action }, ms / 1000);
      awsLatency.observe({ api: action, error: String(failed), status: info?.httpStatus !== undefined ? String(info.httpStatus) : '' }, ms);
      if (failed) {
        ec2Err.inc({ fn: action });
        awsErr.inc({ api: action, error: outcome });
        if (info?.kind === 'throttle') ec2Throttled.inc({ action });
      }
    },
    onRetry(action, code) {
      ec2Retries.inc({ action, code });
    },
    onWait(action, waitMs) {
      ec2Waits.inc({ action });
      ec2WaitSec.inc({ action }, waitMs / 1000);
    },
  };

  return {
    registry,
    ec2,
    observeRpc(verb, outcome, ms) {
      rpcReq.inc({ verb, outcome });
      if (verb === 'add') {
        addReq.inc();
        addLatency.observe({ outcome }, ms / 1000);
        if (outcome === 'RESOURCE_EXHAUSTED') noIp.inc();
      } else if (verb === 'del') {
        delReq.inc();
        delLatency.observe({ outcome }, ms / 1000);
      }
      if (outcome === 'INTERNAL') ipamdErr.inc({ fn: `rpc_${verb}` });
    },
    ipamdError(fn) {
      ipamdErr.inc({ fn });
    },
    reconciled(fn) {
      reconcile.inc({ fn });
    },
    forceRemovedIps(n) {
      if (n > 0) forceRemoved.inc(n);
    },
    setSources(s) {
      src = s;
    },
    text: () => registry.metrics(),
  };
}
