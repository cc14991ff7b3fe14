/**
 * Entry point of the eni-ipam CNI plugin process (bundled to `dist/cni-plugin/eni-ipam.cjs`):
 * one invocation with the process's env, stdin and stdout (handlers.ts has the verbs).
 * A developer's tool (tests, benches, running a verb by hand): production runs the same
 * code inside ipamd behind the native shim, which execs this file only when the config
 * names it as `nodePlugin` (ENI_IPAM_CNI_EXEC=false).
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
