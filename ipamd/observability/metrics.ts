/**
 * ipamd's Prometheus metrics (docs/design.md#metrics), on a registry of their own (several
 * ipamds may live in one process in tests). The metrics themselves live by concept in
 * `metrics/`: pool.ts (sampled from the datastore at scrape time), cni.ts (ADD/DEL),
 * ec2.ts (EC2 calls), state.ts (release gate, evidence, reconcile, subnets, start-up).
 * Plus prom-client's default process and Node.js runtime metrics (`process_*`, `nodejs_*`).
 *
 * Names, types and labels follow amazon-vpc-cni-k8s (`awscni_*`) where the concept is
 * the same; ours are prefixed `eni_ipam_` and use base units (seconds). Every series
 * changes where its concept happens: counters are fed by hooks at the place it happens,
 * gauges are read from the state they describe.
 */
import { collectDefaultMetrics, Gauge, Registry } from 'prom-client';
import { registerCniMetrics, type AddFailureReason, type CniMetricHooks } from './metrics/cni.js';
import { registerEc2Metrics, type Ec2MetricHooks } from './metrics/ec2.js';
import { registerParseErrorMetrics } from './metrics/parse-errors.js';
import type { AnswerParseError } from '../cloud/answer-parse.js';
import { registerPoolMetrics } from './metrics/pool.js';
import { registerCooldownMetrics } from './metrics/cooldown.js';
import { registerConnmarkMetrics } from './metrics/connmark.js';
import type { MetricsSources } from './metrics/sources.js';
import { registerStateMetrics, type StateMetricHooks } from './metrics/state.js';
import { packageVersion } from '../version.js';

export type { MetricsSources } from './metrics/sources.js';
export type { Ec2MetricHooks } from './metrics/ec2.js';
export type { AddFailureReason } from './metrics/cni.js';
export type { ReconcileFacts } from './metrics/state.js';

/** Options of {@link createMetrics}: sources may be given now or later with `setSources`. */
export interface CreateMetricsOptions extends Partial<MetricsSources> {
  /** Build version for `awscni_build_info` (default: this package's version). */
  version?: string;
  /**
   * Collect prom-client's default process/Node.js metrics (default true). The event-loop
   * lag among them samples with a timer every {@link EVENT_LOOP_LAG_SAMPLE_MS}.
   */
  processMetrics?: boolean;
}

/**
 * Sampling interval of `nodejs_eventloop_lag_*` (ms; prom-client's
 * `eventLoopMonitoringPrecision`, the `resolution` of Node's `monitorEventLoopDelay`).
 * prom-client's default, 10 ms, wakes an idle ipamd 100 times a second: ~8 ms of CPU per
 * second on the 2 vCPU reference machine, on every node. At 100 ms a stall still shows in
 * full (the sample after it is late by the stall), with 10 samples a second: 150 or more
 * per 15 s scrape.
 */
export const EVENT_LOOP_LAG_SAMPLE_MS = 100;

/** The metrics of one ipamd: the registry and the hooks that feed it. */
export interface IpamdMetrics extends CniMetricHooks, StateMetricHooks {
  readonly registry: Registry;
  /** EC2 hooks: `new Ec2Api({ ...opts, ...metrics.ec2 })`. */
  readonly ec2: Ec2MetricHooks;
  /** Counts an IMDS or EC2 answer refused because a field did not parse (metrics/parse-errors.ts). */
  answerParseError(e: AnswerParseError): void;
  /** Sets (or replaces) what the gauges read; gauges report nothing/0 until set. */
  setSources(s: MetricsSources): void;
  /** The exposition text (Prometheus text format 0.0.4). */
  text(): Promise<string>;
}

export { packageVersion } from '../version.js';

/**
 * Creates the metrics on a fresh registry. Never throws for missing sources: gauges stay
 * at 0 (or without series) until {@link IpamdMetrics.setSources}.
 */
export function createMetrics(o: CreateMetricsOptions = {}): IpamdMetrics {
  const registry = new Registry();
  let src: MetricsSources | undefined =
    o.ds && o.gate
      ? {
          ds: o.ds,
          gate: o.gate,
          ...(o.pool ? { pool: o.pool } : {}),
          ...(o.limits ? { limits: o.limits } : {}),
          ...(o.sysctls ? { sysctls: o.sysctls } : {}),
          ...(o.connmark ? { connmark: o.connmark } : {}),
          ...(o.now ? { now: o.now } : {}),
          ...(o.evidence ? { evidence: o.evidence } : {}),
          ...(o.quarantined ? { quarantined: o.quarantined } : {}),
        }
      : undefined;
  if (o.processMetrics !== false) {
    collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: EVENT_LOOP_LAG_SAMPLE_MS });
    // Gauges named *_total (promtool: "non-counter metrics should not have _total suffix");
    // the same counts stay exported by type as nodejs_active_handles / _requests / _resources.
    for (const name of ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'])
      registry.removeSingleMetric(name);
  }
  // Upstream's labels are version and goversion (pkg/version/info.go). ipamd has no Go
  // runtime: goversion is empty (Prometheus stores it as absent, so queries grouping by it
  // still work and none reads a Go version that is not there); nodeversion says what runs.
  const build = new Gauge({
    name: 'awscni_build_info',
    help: "A metric with a constant '1' value labelled by version, goversion (empty: ipamd is a Node.js program) and nodeversion",
    labelNames: ['version', 'goversion', 'nodeversion'],
    registers: [registry],
  });
  build.set({ version: o.version ?? packageVersion(), goversion: '', nodeversion: process.version }, 1);
  registerPoolMetrics(registry, () => src);
  registerConnmarkMetrics(registry, () => src);
  registerCooldownMetrics(registry, () => src);
  const state = registerStateMetrics(registry, () => src);
  const cni = registerCniMetrics(registry, (fn) => state.ipamdError(fn));
  const ec2 = registerEc2Metrics(registry);
  const answerParseError = registerParseErrorMetrics(registry);
  return {
    registry,
    ec2,
    answerParseError,
    observeRpc: cni.observeRpc,
    delRequested: cni.delRequested,
    ipConflict: cni.ipConflict,
    addFailed: (reason: AddFailureReason, noIp: boolean) => cni.addFailed(reason, noIp),
    ipamdError: state.ipamdError,
    reconciled: state.reconciled,
    subnetFree: state.subnetFree,
    subnetExhausted: state.subnetExhausted,
    started: state.started,
    inProgress: state.inProgress,
    setSources(s) {
      src = s;
    },
    text: () => registry.metrics(),
  };
}
