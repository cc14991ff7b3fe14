/**
 * Kubernetes API stand-in for tests and demos: see server.ts.
 */
export { KubeApiStandIn, type KubeFailureMode } from './server.js';
export type { PodSpecInput } from './objects.js';
export { kubeconfigYaml, STANDIN_CONTEXT } from './kubeconfig.js';
export {
  ENICONFIG_API_VERSION,
  ENICONFIG_GROUP,
  ENICONFIG_VERSION,
  validateEniConfig,
  type EniConfigSpec,
} from './eniconfig.js';
