/**
 * Kubernetes API stand-in for tests and demos: see server.ts.
 */
export { KubeApiStandIn, type KubeFailureMode } from './server.js';
export type { PodSpecInput } from './objects.js';
export { kubeconfigYaml, STANDIN_CONTEXT } from './kubeconfig.js';
