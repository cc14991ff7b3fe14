/**
 * Entry point of the eni-ipam CNI plugin (bundled to `dist/cni-plugin/eni-ipam.cjs`):
 * verb dispatch only. The verbs (ADD, DEL, CHECK, GC, STATUS) are loaded on demand so
 * VERSION (and errors found before any RPC) never evaluate the gRPC stack.
 */
import { runInvocation, type VerbHandler } from './invocation.js';

const handlers: Record<string, VerbHandler> = {
  ADD: async (env, conf, warnings) => {
    const { cmdAdd } = await import('./add.js');
    const r = await cmdAdd(env, conf, warnings);
    return { output: r.result, ip: r.ip };
  },
  DEL: async (env, conf, warnings) => {
    const { cmdDel } = await import('./del.js');
    const r = await cmdDel(env, conf, warnings);
    return { ip: r.ip };
  },
  CHECK: async (env, conf) => {
    const { cmdCheck } = await import('./check.js');
    await cmdCheck(env, conf);
    return {};
  },
  GC: async (_env, conf, warnings) => {
    const { cmdGc } = await import('./gc.js');
    await cmdGc(conf, warnings);
    return {};
  },
  STATUS: async (_env, conf) => {
    const { cmdStatus } = await import('./status.js');
    await cmdStatus(conf);
    return {};
  },
};

runInvocation(handlers).then(
  (code) => process.exit(code),
  (e: unknown) => {
    process.stderr.write(`eni-ipam: ${(e as Error)?.stack ?? String(e)}\n`);
    process.exit(1);
  },
);
