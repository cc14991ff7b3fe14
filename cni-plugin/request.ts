/** Builds the identifying fields of `AddNetworkRequest` / `DelNetworkRequest` (proto/ipam.proto). */
import { IPAM_API_VERSION, type NetworkRequestIds } from '../proto/ipam.js';
import type { CniEnv } from './env.js';
import type { NetConf } from './netconf.js';

/** The plugin's build version sent as `client_version` (the bundle script defines it from package.json). */
export const PLUGIN_VERSION: string = process.env.ENI_IPAM_BUILD_VERSION ?? 'dev';

/** The allocation key `(network name, container id, ifname)` plus pod metadata, with `api_version` set. */
export function networkIds(env: CniEnv, conf: NetConf): NetworkRequestIds {
  return {
    api_version: IPAM_API_VERSION,
    client_version: PLUGIN_VERSION,
    container_id: env.containerId,
    if_name: env.ifName,
    network_name: conf.name,
    netns: env.netns,
    k8s_pod_name: env.args.podName,
    k8s_pod_namespace: env.args.podNamespace,
    k8s_pod_infra_container_id: env.args.podInfraContainerId,
    k8s_pod_uid: env.args.podUid,
  };
}
