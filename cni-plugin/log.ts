/**
 * The plugin's invocation log: one JSON line per run appended to `logFile` (never
 * stdout, which belongs to the CNI result).
 */
import { appendFileSync, mkdirSync } from 'node:fs';
import { dirname } from 'node:path';

/** One invocation. `ms` is the wall time from start to answer. */
export interface InvocationLog {
  time: string;
  verb: string;
  containerId: string;
  ifName: string;
  netns: string;
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
 * Appends `entry` as one JSON line to `file` (creating its directory). Never throws: a
 * log failure is reported on stderr only.
 */
export function appendInvocationLog(file: string, entry: InvocationLog): void {
  try {
    mkdirSync(dirname(file), { recursive: true });
    appendFileSync(file, `${JSON.stringify(entry)}\n`);
  } catch (e) {
    process.stderr.write(`eni-ipam: cannot write log ${file}: ${(e as Error).message}\n`);
  }
}
