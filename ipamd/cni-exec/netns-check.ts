/**
 * Whether a CNI invocation forwarded by the shim may run inside ipamd (cni-exec/server.ts):
 * ipamd must be in the node netns the shim runs in, and for the verbs that enter the pod
 * netns by its path (ADD, CHECK) that path must name the same namespace for ipamd as for
 * the shim. A refusal is one line naming the DaemonSet setting that fixes it.
 */
import { stat } from 'node:fs/promises';
import path from 'node:path';
import type { ExecRequest } from './protocol.js';

/** Verbs that enter the pod netns by its path (DEL, GC, STATUS, VERSION never do). */
const ENTERS_POD_NETNS = new Set(['ADD', 'CHECK']);

/** `<dev>:<ino>` of the namespace file at `p` (what the shim sends), or `!<code>` when stat fails. */
export async function netnsId(p: string): Promise<string> {
  try {
    const s = await stat(p, { bigint: true });
    return `${s.dev}:${s.ino}`;
  } catch (e) {
    return `!${(e as NodeJS.ErrnoException).code ?? 'error'}`;
  }
}

/**
 * Why `req` must not run in ipamd, whose node netns is `nodeNetnsId` ({@link netnsId} of
 * it): one line naming the DaemonSet setting (hostNetwork, hostPID, the netns hostPath
 * mount's propagation); undefined when it may run. A pod netns gone for both is not a
 * refusal (the plugin code reports it as the shim's own run would).
 */
export async function netnsRefusal(req: ExecRequest, nodeNetnsId: string): Promise<string | undefined> {
  if (req.selfNetns !== nodeNetnsId) {
    return `ipamd is not in the node's network namespace (the plugin runs in netns ${req.selfNetns}, ipamd wires the node side in ${nodeNetnsId}): the eni-ipam DaemonSet needs hostNetwork: true`;
  }
  const netns = req.env.CNI_NETNS ?? '';
  if (!ENTERS_POD_NETNS.has(req.env.CNI_COMMAND ?? '') || netns === '') return undefined;
  const mine = await netnsId(netns);
  if (req.podNetns.startsWith('!') && mine.startsWith('!')) return undefined; // gone for both: the plugin code reports it
  if (req.podNetns.startsWith('!'))
    return `CNI_NETNS ${netns} does not exist for the plugin (${req.podNetns.slice(1)}) but does for ipamd: the plugin and ipamd must see the node's mounts alike`;
  if (mine === req.podNetns) return undefined;
  const proc = netns.startsWith('/proc/');
  // Another process's /proc/<pid>/ns/net opens only with ptrace access: without CAP_SYS_PTRACE,
  // a target holding capabilities ipamd lacks (the chart drops ALL) refuses it.
  if (proc && (mine === '!EACCES' || mine === '!EPERM'))
    return `ipamd may not open the pod netns: CNI_NETNS ${netns} was refused (${mine.slice(1)}); a runtime that names pod netns by /proc/<pid>/ns/net needs the eni-ipam DaemonSet with hostPID: true and the SYS_PTRACE capability (chart values hostPID and securityContext.capabilities.add)`;
  const seen = mine.startsWith('!')
    ? `does not exist in ipamd's ${proc ? 'PID' : 'mount'} namespace (${mine.slice(1)})`
    : `is another namespace for ipamd (${mine}) than for the plugin (${req.podNetns})`;
  const fix = proc
    ? 'the eni-ipam DaemonSet needs hostPID: true'
    : `the eni-ipam DaemonSet needs the ${path.dirname(netns)} hostPath mount with mountPropagation: HostToContainer`;
  return `ipamd cannot enter the pod netns: CNI_NETNS ${netns} ${seen}; ${fix}`;
}
