/**
 * The CNI plugin as ipamd sees it: the one module of cni-plugin/ that ipamd imports.
 * ipamd's CNI exec server (ipamd/cni-exec) runs plugin invocations in-process with
 * {@link runInvocation} and {@link VERB_HANDLERS}, handing the plugin code a
 * {@link PluginHost} (its own IPAM service called directly, `ip` spawned from its worker
 * through netfacts/ip-batch.ts's runner, the node netns, the rtnetlink helper ADD wires
 * with: {@link netlinkHelper}); its DEL spool applier tears down the
 * node side of a pod ({@link teardownAttachment}); its evidence pass pairs
 * an IPv6 pod's egress address with it by name ({@link egressVethNames}). Shared wire types
 * live in proto/, shared node networking facts in netfacts/. The plugin imports nothing
 * from ipamd/.
 */
export { VERB_HANDLERS } from './handlers.js';
export {
  runInvocation,
  type InvocationIo,
  type VerbContext,
  type VerbHandler,
  type VerbOutcome,
} from './invocation.js';
export { LOCAL_NODE, type NodeSide, type PluginHost } from './host.js';
export { SUPPORTED_VERSIONS } from './versions.js';
export { connectIpamd } from './ipamd-client.js';
export { SessionPool } from './grpc-http2.js';
export { teardownAttachment, teardownHost, type HostTeardown } from './host-teardown.js';
export { hostVethName, hostVethNames } from './veth-name.js';
export { egressVeth, egressVethNames } from './wiring-plan.js';
export { netlinkHelper, type NetlinkHelper } from './netlink-helper.js';
