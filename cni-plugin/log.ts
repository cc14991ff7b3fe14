/**
 * The plugin's invocation log: one JSON line per run appended to `logFile` (never
 * stdout, which belongs to the CNI result).
 */
import { appendFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { mkdirParents } from '../nodefs/dirs.js';

/** One invocation. `ms` is the wall time from start to answer. */
export interface InvocationLog {
  time: string;
  verb: string;
  containerId: string;
  ifName: string;
  netns: string;
  /** The pod's namespace and name (CNI_ARGS K8S_POD_NAMESPACE, K8S_POD_NAME), when the runtime sent them. */
  podNamespace?: string;
  podName?: string;
  outcome: 'ok' | 'error';
  ms: number;
  /** CNI error code and message when `outcome` is "error". */
  code?: number;
  msg?: string;
  details?: string;
  /** The pod IPv4 (ADD). */
  ip?: string;
  /** Things that went wrong without failing the verb (e.g. ipamd unreachable on DEL). */
  warnings?: string[];
}

/**
 * Appends `entry` as one JSON line to `file` (creating its directory), with one write
 * (O_APPEND), so concurrent invocations never interleave lines. Never throws: a log
 * failure is reported through `stderr` only.
 */
export async function appendInvocationLog(
  file: string,
  entry: InvocationLog,
  stderr: (s: string) => void,
): Promise<void> {
  try {
    await mkdirParents(dirname(file));
    await appendFile(file, `${JSON.stringify(entry)}\n`);
  } catch (e) {
    stderr(`eni-ipam: cannot write log ${file}: ${(e as Error).message}\n`);
  }
}
