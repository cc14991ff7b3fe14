/**
 * What a failed nothing-lost check prints beside its violations, so that a failure on a
 * loaded CI machine can be read from its message alone: for each address a violation
 * names, in time order, every EC2 call that assigned or unassigned it (with when it
 * arrived and how long it took), the live sandbox holding it (created when), and ipamd's
 * log lines that name it.
 */
import { readFile } from 'node:fs/promises';
import type { ApiCallRecord } from '../sim/types.js';
import { listParam, prefixAddresses, type LiveSandbox } from './nothing-lost.js';

/** Most log lines shown per address. */
const MAX_LOG_LINES = 20;

/** One event of an address's timeline. */
interface Event {
  at: number;
  text: string;
}

const iso = (ms: number): string => new Date(ms).toISOString().slice(11, 23);

/** The IPv4 addresses named in `lines` (deduplicated, in order). */
export function addressesNamed(lines: string[]): string[] {
  return [...new Set(lines.flatMap((l) => l.match(/\b\d{1,3}(?:\.\d{1,3}){3}\b(?!\/)/g) ?? []))];
}

/** EC2 calls that assigned or unassigned `ip` (directly or through the /28 holding it). */
function callEvents(ip: string, calls: readonly ApiCallRecord[]): Event[] {
  const out: Event[] = [];
  const names = (c: ApiCallRecord): boolean =>
    listParam(c.params, 'PrivateIpAddress').includes(ip) ||
    listParam(c.params, 'Ipv4Prefix').some((p) => prefixAddresses(p).includes(ip)) ||
    (c.assigned ?? []).some((a) => a === ip || (a.includes('/') && prefixAddresses(a).includes(ip)));
  for (const c of calls) {
    if (!/^(Una|A)ssignPrivateIpAddresses$/.test(c.action) || !names(c)) continue;
    const took = c.durationMs === undefined ? 'no answer yet' : `${c.ok ? 'ok' : c.errorCode} in ${c.durationMs} ms`;
    out.push({ at: c.at, text: `EC2 ${c.action} ${c.params['NetworkInterfaceId'] ?? ''} (${took})` });
  }
  return out;
}

/** ipamd's JSON log lines (pino: `time` in ms, `msg`) whose text names `ip`. */
function logEvents(ip: string, logText: string): Event[] {
  const re = new RegExp(`"${ip.replace(/\./g, '\\.')}"|\\b${ip.replace(/\./g, '\\.')}\\b(?!/)`);
  const out: Event[] = [];
  for (const line of logText.split('\n')) {
    if (!line.startsWith('{') || !re.test(line)) continue;
    try {
      const j = JSON.parse(line) as { time?: number; msg?: string; podName?: string; containerID?: string };
      const who = j.podName ?? j.containerID?.slice(0, 12) ?? '';
      out.push({ at: j.time ?? 0, text: `ipamd: ${j.msg ?? ''}${who ? ` (${who})` : ''}` });
    } catch {
      /* a partial line */
    }
  }
  return out.slice(-MAX_LOG_LINES);
}

/**
 * The timeline of every address the violations name, one block per address.
 * @param ipamdLog path of ipamd's JSON log (optional; unreadable → no log lines).
 */
export async function lossTimeline(
  violations: string[],
  calls: readonly ApiCallRecord[],
  live: readonly LiveSandbox[],
  ipamdLog?: string,
): Promise<string> {
  const logText = ipamdLog ? await readFile(ipamdLog, 'utf8').catch(() => '') : '';
  const blocks: string[] = [];
  for (const ip of addressesNamed(violations)) {
    const events = [
      ...callEvents(ip, calls),
      ...logEvents(ip, logText),
      ...live.filter((s) => s.ip === ip).map((s) => ({ at: s.createdAtMs, text: `sandbox of ${s.podName} created` })),
    ].sort((a, b) => a.at - b.at);
    blocks.push(`timeline of ${ip}:\n${events.map((e) => `  ${iso(e.at)} ${e.text}`).join('\n')}`);
  }
  return blocks.join('\n');
}
