/**
 * Reading what ipamd and the CNI plugin logged, for the restore scenarios: ipamd's JSON
 * log (pino lines with `msg`, `containerID`, `ip`) and the plugin's invocation log (one
 * JSON line per CNI call, cni-plugin/log.ts). Both files are read whole; they are small.
 */
import { readFile } from 'node:fs/promises';

/** One ipamd log line (only the fields these tests read). */
export interface IpamdLogLine {
  msg: string;
  containerID?: string;
  ip?: string;
  reason?: string;
  time?: number;
}

/** One plugin invocation (cni-plugin/log.ts InvocationLog, the fields read here). */
export interface CniLogLine {
  verb: string;
  containerId: string;
  netns: string;
  outcome: 'ok' | 'error';
  ip?: string;
  warnings?: string[];
  msg?: string;
}

/** Parses a JSON-lines file; lines that are not JSON objects are skipped. Missing file → []. */
async function jsonLines<T>(file: string): Promise<T[]> {
  const text = await readFile(file, 'utf8').catch(() => '');
  const out: T[] = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      out.push(JSON.parse(line) as T);
    } catch {
      /* partial line */
    }
  }
  return out;
}

/** ipamd's log lines, optionally only those whose `msg` equals `msg`. */
export async function ipamdLog(file: string, msg?: string): Promise<IpamdLogLine[]> {
  const all = await jsonLines<IpamdLogLine>(file);
  return msg === undefined ? all : all.filter((l) => l.msg === msg);
}

/** ipamd log message of a release by DEL. */
export const DEL_RELEASE_MSG = 'released IP';
/**
 * Start of the GC's release message ("GC: no source vouches for this allocation; released
 * into cooldown", or with the sources named: "... allocation (runtime, Kubernetes, kernel); ...").
 */
export const GC_RELEASE_PREFIX = 'GC: no source vouches for this allocation';

/** Every release ipamd logged (DEL or GC), in order. */
export async function releases(file: string): Promise<IpamdLogLine[]> {
  return (await ipamdLog(file)).filter((l) => l.msg === DEL_RELEASE_MSG || l.msg.startsWith(GC_RELEASE_PREFIX));
}

/** The plugin's invocations, optionally only those of `containerId`. */
export async function cniLog(file: string, containerId?: string): Promise<CniLogLine[]> {
  const all = await jsonLines<CniLogLine>(file);
  return containerId === undefined ? all : all.filter((l) => l.containerId === containerId);
}
