/**
 * The plugin's verb handlers (ADD, DEL, CHECK, GC, STATUS; VERSION is built into
 * invocation.ts), shared by both hosts of the plugin code: the plugin process
 * (main.ts) and ipamd's CNI exec server (ipamd/cni-exec), so an invocation gives the
 * same result whichever runs it. Each verb module is loaded on first use, so VERSION
 * (and errors found before any RPC) never evaluate the gRPC stack in the plugin process.
 */
import type { VerbHandler } from './invocation.js';

/** Handlers keyed by CNI_COMMAND. */
export const VERB_HANDLERS: Readonly<Record<string, VerbHandler>> = Object.freeze({
  ADD: async (env, conf, warnings, ctx) => {
    const { cmdAdd } = await import('./add.js');
    const r = await cmdAdd(env, conf, warnings, ctx);
    return { outputJson: r.json, ip: r.ip };
  },
  DEL: async (env, conf, warnings, ctx) => {
    const { cmdDel } = await import('./del.js');
    const r = await cmdDel(env, conf, warnings, ctx);
    return { ip: r.ip };
  },
  CHECK: async (env, conf, _warnings, ctx) => {
    const { cmdCheck } = await import('./check.js');
    await cmdCheck(env, conf, ctx);
    return {};
  },
  GC: async (_env, conf, warnings, ctx) => {
    const { cmdGc } = await import('./gc.js');
    await cmdGc(conf, warnings, ctx);
    return {};
  },
  STATUS: async (_env, conf, _warnings, ctx) => {
    const { cmdStatus } = await import('./status.js');
    await cmdStatus(conf, ctx);
    return {};
  },
} satisfies Record<string, VerbHandler>);
