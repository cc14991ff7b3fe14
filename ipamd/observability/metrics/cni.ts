/**
 * CNI request metrics: the amazon-vpc-cni-k8s counters (`awscni_add_ip_req_count`,
 * `awscni_del_ip_req_count{reason}`, `awscni_no_available_ip_addresses` — a counter, as
 * upstream) and ours: ADD/DEL latency histograms by outcome (buckets 0.5 ms … 30 s),
 * ADD failures by reason, gRPC requests by verb/outcome, duplicate-IP conflicts.
 */
import { Counter, Histogram, type Registry } from 'prom-client';

/** Latency buckets of ADD/DEL in seconds: memory-served ADDs take ~1 ms, waits up to ADD's bound, 30 s the top. */
export const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/**
 * Why an ADD got no address: `no_ip` (the pool is empty and not managed or shutting
 * down), `subnet_full` (EC2: no free address in the subnet), `eni_limit` (MAX_ENI or
 * the instance's ENI/IP limits bind), `eniconfig` (custom networking: only a new ENI could serve and the
 * node's ENIConfig is missing, invalid or unreadable), `throttled` (EC2 throttled the refill), `frozen`
 * (the addresses the pool holds are unverified or releasing while releases are frozen),
 * `timeout` (the bounded wait ran out while the refill was under way or failing
 * transiently), `not_ready` (an address restored for this container is not visible on
 * an ENI yet), `internal` (anything else, e.g. the checkpoint write failed).
 */
export const ADD_FAILURE_REASONS = [
  'no_ip',
  'subnet_full',
  'eni_limit',
  'eniconfig',
  'throttled',
  'frozen',
  'timeout',
  'not_ready',
  'internal',
] as const;
export type AddFailureReason = (typeof ADD_FAILURE_REASONS)[number];

/** DEL reasons kept as label values (ours and amazon-vpc-cni-k8s's plugin's); any other is `other`. */
const DEL_REASONS = new Set(['cni-del', 'add-failed', 'ip-conflict', 'unspecified', 'PodDeleted', 'SetupNSFailed']);

/** The hooks of the CNI request metrics. */
export interface CniMetricHooks {
  /** RpcServer `observe`: verb (add, del, status, gc, check), outcome ("ok" or a gRPC status name), latency ms. */
  observeRpc(verb: string, outcome: string, ms: number): void;
  /** A DEL request arrived with this reason (any string; unknown ones count as `other`). */
  delRequested(reason: string): void;
  /** An ADD failed for `reason`; `noIp` when it failed for want of an address (upstream's counter). */
  addFailed(reason: AddFailureReason, noIp: boolean): void;
  /** An ADD was refused because the node already routed its IP to another pod. */
  ipConflict(): void;
}

/** Registers the CNI metrics on `registry`. `internalError(fn)` is told of INTERNAL outcomes. */
export function registerCniMetrics(registry: Registry, internalError: (fn: string) => void): CniMetricHooks {
  const registers = [registry];
  const addReq = new Counter({
    name: 'awscni_add_ip_req_count',
    help: 'The number of add IP address requests',
    registers,
  });
  const delReq = new Counter({
    name: 'awscni_del_ip_req_count',
    help: 'The number of delete IP address requests, by the reason the plugin gave',
    labelNames: ['reason'],
    registers,
  });
  const noIp = new Counter({
    name: 'awscni_no_available_ip_addresses',
    help: 'The number of pod IP assignments that failed because no IP address was available',
    registers,
  });
  const failures = new Counter({
    name: 'eni_ipam_add_failures_total',
    help: 'ADDs that got no address, by reason (no_ip, subnet_full, eni_limit, throttled, frozen, timeout, not_ready, internal)',
    labelNames: ['reason'],
    registers,
  });
  for (const reason of ADD_FAILURE_REASONS) failures.inc({ reason }, 0);
  const conflicts = new Counter({
    name: 'eni_ipam_ip_conflicts_total',
    help: 'ADDs refused because the node already routed the assigned IP to another pod (duplicate IP; the IP is quarantined)',
    registers,
  });
  const addLatency = new Histogram({
    name: 'eni_ipam_add_latency_seconds',
    help: 'AddNetwork latency (seconds), by outcome',
    labelNames: ['outcome'],
    buckets: LATENCY_BUCKETS,
    registers,
  });
  const delLatency = new Histogram({
    name: 'eni_ipam_del_latency_seconds',
    help: 'DelNetwork latency (seconds), by outcome',
    labelNames: ['outcome'],
    buckets: LATENCY_BUCKETS,
    registers,
  });
  // The usual outcome exists from the start (at 0), so rate() over the buckets counts the first ADDs/DELs too.
  addLatency.zero({ outcome: 'ok' });
  delLatency.zero({ outcome: 'ok' });
  const rpcReq = new Counter({
    name: 'eni_ipam_rpc_requests_total',
    help: 'gRPC requests by verb and outcome',
    labelNames: ['verb', 'outcome'],
    registers,
  });
  return {
    observeRpc(verb, outcome, ms) {
      rpcReq.inc({ verb, outcome });
      if (verb === 'add') {
        addReq.inc();
        addLatency.observe({ outcome }, ms / 1000);
      } else if (verb === 'del') {
        delLatency.observe({ outcome }, ms / 1000);
      }
      if (outcome === 'INTERNAL') internalError(`rpc_${verb}`);
    },
    delRequested(reason) {
      delReq.inc({ reason: DEL_REASONS.has(reason) ? reason : 'other' });
    },
    addFailed(reason, isNoIp) {
      failures.inc({ reason });
      if (isNoIp) noIp.inc();
    },
    ipConflict() {
      conflicts.inc();
    },
  };
}
