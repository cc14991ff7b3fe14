/**
 * Reads this node's `status.nodeInfo.containerRuntimeVersion` (`GET /api/v1/nodes/<name>`
 * through @kubernetes/client-node): kubelet builds it from the CRI `Version` of the
 * runtime it uses (`<runtime_name>://<runtime_version>`), so ipamd can tell whether the
 * runtime it reads is the one kubelet uses (plausibility.ts).
 */
import { CoreV1Api, type KubeConfig } from './client.js';
import { describeError } from './errors.js';

/**
 * The node's containerRuntimeVersion within `timeoutMs` (ms).
 * @returns the string (e.g. `containerd://1.6.20`), or undefined when the node cannot be
 *   read or carries none (the identity check is then skipped; the coverage check still
 *   applies). Never throws; `onError` gets the reason.
 */
export async function readNodeRuntimeVersion(
  kc: KubeConfig,
  nodeName: string,
  timeoutMs: number,
  onError?: (why: string) => void,
): Promise<string | undefined> {
  let timer: NodeJS.Timeout | undefined;
  try {
    const api = kc.makeApiClient(CoreV1Api);
    const req = api.readNode({ name: nodeName });
    req.catch(() => undefined); // the deadline may win
    const node = await Promise.race([
      req,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`node read timed out after ${timeoutMs} ms`)), timeoutMs);
      }),
    ]);
    return node.status?.nodeInfo?.containerRuntimeVersion || undefined;
  } catch (e) {
    onError?.(describeError(e));
    return undefined;
  } finally {
    clearTimeout(timer);
  }
}
