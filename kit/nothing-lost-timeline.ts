/**
 * What a failed nothing-lost check prints beside its violations, so that a failure on a
 * loaded CI machine can be read from its message alone: for each address a violation
 * names, in time order, every EC2 call that assigned or unassigned it (with when it
 * arrived and how long it took), the live sandbox holding it (created when), and ipamd's
 * log lines that name it. Also when ipamd handed each container its address
 * ({@link handOutTimes}), which the check itself reads.
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

/** One ipamd JSON log line (pino: `time` in ms since epoch, `msg`), the fields read here, with its raw text. */
interface IpamdLine {
  raw: string;
  time?: number;
  msg?: string;
  podName?: string;
  containerID?: string;
}

/** The JSON lines of ipamd's log text (partial or non-JSON lines skipped). */
function ipamdLines(logText: string): IpamdLine[] {
  const out: IpamdLine[] = [];
  for (const raw of logText.split('\n')) {
    if (!raw.startsWith('{')) continue;
    try {
      out.push({ ...(JSON.parse(raw) as Omit<IpamdLine, 'raw'>), raw });
    } catch {
      /* a partial line */
    }
  }
  return out;
}

/** ipamd's log lines whose text names `ip`. */
function logEvents(ip: string, lines: IpamdLine[]): Event[] {
  const re = new RegExp(`"${ip.replace(/\./g, '\\.')}"|\\b${ip.replace(/\./g, '\\.')}\\b(?!/)`);
  return lines
    .filter((j) => re.test(j.raw))
    .map((j) => {
      const who = j.podName ?? j.containerID?.slice(0, 12) ?? '';
      return { at: j.time ?? 0, text: `ipamd: ${j.msg ?? ''}${who ? ` (${who})` : ''}` };
    })
    .slice(-MAX_LOG_LINES);
}

/**
 * When ipamd logged "assigned IP" for each container (the last time), ms since epoch, from
 * its JSON log at `ipamdLog` (the nothing-lost check's `handedOutAt`); unreadable → empty.
 */
export async function handOutTimes(ipamdLog: string): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const j of ipamdLines(await readFile(ipamdLog, 'utf8').catch(() => '')))
    if (j.msg === 'assigned IP' && j.containerID && typeof j.time === 'number') out.set(j.containerID, j.time);
  return out;
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
  const lines = ipamdLines(ipamdLog ? await readFile(ipamdLog, 'utf8').catch(() => '') : '');
  const blocks: string[] = [];
  for (const ip of addressesNamed(violations)) {
    const events = [
      ...callEvents(ip, calls),
      ...logEvents(ip, lines),
      ...live.filter((s) => s.ip === ip).map((s) => ({ at: s.createdAtMs, text: `sandbox of ${s.podName} created` })),
    ].sort((a, b) => a.at - b.at);
    blocks.push(`timeline of ${ip}:\n${events.map((e) => `  ${iso(e.at)} ${e.text}`).join('\n')}`);
  }
  return blocks.join('\n');
}
