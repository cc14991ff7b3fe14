/**
 * The health service names ipamd answers on its gRPC socket (grpc.health.v1): "" and
 * `eniipam.v1.CNIBackend` SERVING only while ipamd serves pods (the readiness probe), and
 * {@link LIVENESS_SERVICE} SERVING whenever the process answers at all (the liveness probe:
 * also while it drains, or stands by beside aws-node, startup/standby.ts).
 */
import { CNI_BACKEND_SERVICE } from '../../proto/ipam.js';

/** The health service name the chart's liveness probe asks (`--service`). */
export const LIVENESS_SERVICE = 'eniipam.v1.Liveness';

/** Health statuses before ipamd serves: not ready, alive. */
export function notServingYet(): Record<string, 'SERVING' | 'NOT_SERVING'> {
  return { '': 'NOT_SERVING', [CNI_BACKEND_SERVICE]: 'NOT_SERVING', [LIVENESS_SERVICE]: 'SERVING' };
}
