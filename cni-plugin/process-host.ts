/**
 * The plugin process's host (host.ts): each verb opens its own gRPC channel to the
 * conflist's `ipamdSocket`, `ip` is forked from this thread, the current netns is the
 * node's. Imported by the verb modules only (loaded on first use), so VERSION never
 * evaluates the gRPC stack.
 */
import type { PluginHost } from './host.js';
import { LOCAL_IP } from '../netfacts/ip-batch.js';
import { connectIpamd } from './ipamd-client.js';

/** The host of the one-shot plugin process. */
export const PROCESS_HOST: PluginHost = Object.freeze({
  ipamd: (socketPath: string) => connectIpamd(socketPath),
  ip: LOCAL_IP,
});

/** The host of a verb: the one in its context, else {@link PROCESS_HOST}. */
export function hostOf(ctx: { host?: PluginHost }): PluginHost {
  return ctx.host ?? PROCESS_HOST;
}
