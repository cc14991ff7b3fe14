/**
 * Answers of IMDS and EC2 refused because a field did not parse (cloud/answer-parse.ts):
 * `eni_ipam_imds_parse_errors_total{field}` and `eni_ipam_ec2_parse_errors_total{action,field}`.
 * Ours, so `eni_ipam_*` (docs/design.md#metrics): amazon-vpc-cni-k8s has no such counter
 * (its `awscni_ec2api_error_count{fn}` counts failed calls, and a garbage answer is not one).
 */
import { Counter, type Registry } from 'prom-client';
import type { AnswerParseError } from '../../cloud/answer-parse.js';

/** Registers the two counters; returns what counts one refused answer. */
export function registerParseErrorMetrics(registry: Registry): (e: AnswerParseError) => void {
  const imds = new Counter({
    name: 'eni_ipam_imds_parse_errors_total',
    help: 'IMDS answers refused because a field did not parse (the last good view was kept), by field',
    labelNames: ['field'],
    registers: [registry],
  });
  const ec2 = new Counter({
    name: 'eni_ipam_ec2_parse_errors_total',
    help: 'EC2 API answers refused because a field did not parse (the last good view was kept), by API and field',
    labelNames: ['action', 'field'],
    registers: [registry],
  });
  return (e) => (e.source === 'imds' ? imds.inc({ field: e.field }) : ec2.inc({ action: e.where, field: e.field }));
}
