/**
 * The plugin's host: everything a verb needs from whoever runs it, beyond the CNI
 * environment and config, as one object passed in the verb's context (invocation.ts
 * `VerbContext`). Two hosts exist: the plugin process (process-host.ts: gRPC over
 * the conflist's `ipamdSocket`, `ip` forked from this thread, the current netns is the
 * node's) and ipamd's CNI exec server (ipamd/cni-exec/server.ts: its own IPAM service
 * called directly, `ip` started by its spawn helper, the node netns it was configured
 * with, its rtnetlink helper for ADD's wiring). Nothing in the plugin code is switched process-wide.
 */
import type { IpamdClient } from '../proto/ipamd-api.js';
import { LOCAL_IP, type IpRunner } from '../netfacts/ip-batch.js';
import type { NetlinkHelper } from './netlink-helper.js';

/** How a verb reaches ipamd, spawns `ip`, and which netns is the node's. */
export interface PluginHost {
  /**
   * A client of the ipamd serving on `socketPath` (a config's `ipamdSocket`), for one
   * verb; the verb calls its `close()` when done.
   */
  ipamd(socketPath: string): IpamdClient;
  /** How `ip` is run (node side and pod side). */
  ip: IpRunner;
  /**
   * Path of the network namespace the node side (host veth, host routes, ip rules) is
   * wired in; undefined = the current netns (the plugin process's, or a host-network ipamd's).
   */
  nodeNetns?: string;
  /**
   * ipamd's rtnetlink helper (netlink-helper.ts): when present, ADD wires the pod through
   * it (netlink-wiring.ts) and starts no process; otherwise with two `ip` batches (wiring.ts).
   * DEL and GC delete the host veth and the pod's known rules through it too.
   */
  netlink?: NetlinkHelper;
}

/**
 * The part of a host that wiring and teardown need: how to run `ip`, where the node side
 * is, and the netlink helper when there is one (then the host veth and the pod's rules are
 * deleted through it: wiring.ts `deleteHostVeth`, host-teardown.ts).
 */
export type NodeSide = Pick<PluginHost, 'ip' | 'nodeNetns' | 'netlink'>;

/** The current netns is the node's; `ip` forked from this thread. */
export const LOCAL_NODE: NodeSide = Object.freeze({ ip: LOCAL_IP });
