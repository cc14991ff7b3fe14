/**
 * The one door through which ipamd reaches @kubernetes/client-node: the parts it uses
 * (KubeConfig, Watch, CoreV1Api, CustomObjectsApi, ListWatch, Observable, PatchStrategy
 * and the model types), imported
 * from the library's own modules rather than its index. Import Kubernetes client code
 * from here, never from '@kubernetes/client-node' directly (its index loads every
 * generated API and model: ~40 MiB of resident memory).
 *
 * `npm run build` replaces this module's compiled output (dist/ipamd/kube/client.js) with
 * a tree-shaken, minified esbuild bundle of the same exports (scripts/bundle-vendor.mjs):
 * only the classes reached from these exports are parsed and kept (~14 MiB instead of ~40).
 * Without that step (plain `tsc`), this file runs as written, with the same behaviour.
 * Why and what it saved: docs/design.md#16-footprint-and-latency.
 */
export { KubeConfig } from '@kubernetes/client-node/dist/config.js';
export { Watch } from '@kubernetes/client-node/dist/watch.js';
export { PatchStrategy } from '@kubernetes/client-node/dist/patch.js';
export {
  ObjectCoreV1Api as CoreV1Api,
  ObjectCustomObjectsApi as CustomObjectsApi,
} from '@kubernetes/client-node/dist/gen/types/ObjectParamAPI.js';
// For the ENIConfig source (custom networking): the informer's event names and ListWatch.
export { ADD, DELETE, ERROR, UPDATE } from '@kubernetes/client-node/dist/informer.js';
export { ListWatch } from '@kubernetes/client-node/dist/cache.js';
export type { KubernetesListObject, KubernetesObject } from '@kubernetes/client-node/dist/types.js';
export { Observable } from '@kubernetes/client-node/dist/gen/rxjsStub.js';
export type { Middleware as ObservableMiddleware } from '@kubernetes/client-node/dist/gen/middleware.js';
export type { CoreV1Event, V1Node, V1Pod } from '@kubernetes/client-node/dist/gen/models/all.js';
