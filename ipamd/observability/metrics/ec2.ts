/**
 * EC2 call metrics, fed by the `Ec2Api` hooks: amazon-vpc-cni-k8s's
 * `awscni_ec2api_req_count{fn}`, `awscni_ec2api_error_count{fn}`,
 * `awscni_aws_api_error_count{api,error}` and `awscni_aws_api_latency_ms{api,error,status}`
 * (a summary without quantiles, as upstream; `error` "true"/"false", `status` the HTTP
 * status) and ours: attempts by action/outcome, a latency histogram by action (buckets
 * 1 ms … 30 s), throttles, retries and budget waits.
 */
import { Counter, Histogram, Summary, type Registry } from 'prom-client';
import type { Ec2CallInfo } from '../../cloud/ec2.js';

/** Latency buckets of one EC2 attempt in seconds. */
export const EC2_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/** Hooks to spread into `Ec2ApiOptions` (`observe`, `onRetry`, `onWait`). */
export interface Ec2MetricHooks {
  observe(action: string, outcome: string, ms: number, info?: Ec2CallInfo): void;
  onRetry(action: string, code: string, attempt: number, delayMs: number): void;
  onWait(action: string, waitMs: number): void;
}

/** Registers the EC2 metrics on `registry` and returns the hooks that feed them. */
export function registerEc2Metrics(registry: Registry): Ec2MetricHooks {
  const registers = [registry];
  const ec2Req = new Counter({
    name: 'awscni_ec2api_req_count',
    help: 'The number of requests made to EC2 APIs by CNI',
    labelNames: ['fn'],
    registers,
  });
  const ec2Err = new Counter({
    name: 'awscni_ec2api_error_count',
    help: 'The number of failed EC2 APIs requests',
    labelNames: ['fn'],
    registers,
  });
  const awsErr = new Counter({
    name: 'awscni_aws_api_error_count',
    help: 'The number of times AWS API returns an error',
    labelNames: ['api', 'error'],
    registers,
  });
  const awsLatency = new Summary({
    name: 'awscni_aws_api_latency_ms',
    help: 'AWS API call latency in ms',
    labelNames: ['api', 'error', 'status'],
    percentiles: [],
    registers,
  });
  const ec2Calls = new Counter({
    name: 'eni_ipam_ec2_requests_total',
    help: 'EC2 attempts by action and outcome ("ok" or the EC2 error code)',
    labelNames: ['action', 'outcome'],
    registers,
  });
  const ec2Latency = new Histogram({
    name: 'eni_ipam_ec2_request_duration_seconds',
    help: 'Latency of one EC2 attempt (seconds), by action',
    labelNames: ['action'],
    buckets: EC2_BUCKETS,
    registers,
  });
  const ec2Throttled = new Counter({
    name: 'eni_ipam_ec2_throttled_total',
    help: 'EC2 attempts refused by throttling (RequestLimitExceeded and the like), by action',
    labelNames: ['action'],
    registers,
  });
  const ec2Retries = new Counter({
    name: 'eni_ipam_ec2_retries_total',
    help: 'EC2 attempts retried after a failure, by action and error code',
    labelNames: ['action', 'code'],
    registers,
  });
  const ec2Waits = new Counter({
    name: 'eni_ipam_ec2_budget_waits_total',
    help: 'EC2 attempts that waited for the node-local token bucket or a back-off hold, by action',
    labelNames: ['action'],
    registers,
  });
  const ec2WaitSec = new Counter({
    name: 'eni_ipam_ec2_budget_wait_seconds_total',
    help: 'Seconds EC2 attempts waited for the token bucket or a back-off hold, by action',
    labelNames: ['action'],
    registers,
  });
  return {
    observe(action, outcome, ms, info) {
      const failed = outcome !== 'ok';
      ec2Req.inc({ fn: action });
      ec2Calls.inc({ action, outcome });
      ec2Latency.observe({ action }, ms / 1000);
      // From an action's first call on, its throttle series exists (at 0): a rule's
      // increase()/rate() then sees its first throttles, not only those after the series appeared.
      ec2Throttled.inc({ action }, failed && info?.kind === 'throttle' ? 1 : 0);
      awsLatency.observe(
        { api: action, error: String(failed), status: info?.httpStatus !== undefined ? String(info.httpStatus) : '' },
        ms,
      );
      if (failed) {
        ec2Err.inc({ fn: action });
        awsErr.inc({ api: action, error: outcome });
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
}
