/**
 * Entry point of the eni-ipam CNI plugin process (bundled to `dist/cni-plugin/eni-ipam.cjs`):
 * one invocation with the process's env, stdin and stdout (handlers.ts has the verbs).
 * The native shim (cni-plugin/shim) execs this file when ipamd's exec socket cannot
 * be used.
 */
import { VERB_HANDLERS } from './handlers.js';
import { runInvocation } from './invocation.js';

runInvocation(VERB_HANDLERS).then(
  (code) => process.exit(code),
  (e: unknown) => {
    process.stderr.write(`eni-ipam: ${(e as Error)?.stack ?? String(e)}\n`);
    process.exit(1);
  },
);
