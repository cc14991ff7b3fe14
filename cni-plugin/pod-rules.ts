/**
 * The pod's ip rules as data (docs/design.md#1-the-parts-and-how-a-pod-gets-its-ip step 4: prio 512 `to <ip> lookup main`, prio 1536
 * `from <ip> lookup <eni table>`). The rules themselves are whatever
 * `wiring.ts`'s `policyRoutingLines(plan)` adds (`rule add|replace ...` batch lines);
 * this file parses those lines so CHECK verifies and DEL/GC remove exactly them, and
 * finds any rule naming a pod IP when the table is not known (DEL without ipamd).
 */
import type { IpJson } from './ip-query.js';
import { policyRoutingLines, type WiringPlan } from './wiring.js';

/** One ip rule selector + action. Addresses without `/32`; table as iproute2 prints it. */
export interface PodRule {
  priority?: number;
  /** Source address (`from`), 'all' when absent. */
  from: string;
  /** Destination address (`to`), undefined when absent. */
  to?: string;
  /** Table name or number (`main`, `3`). */
  table?: string;
}

const TABLE_NAMES: Record<string, string> = { 254: 'main', 255: 'local', 253: 'default' };
const normTable = (t: string): string => TABLE_NAMES[t] ?? t;
const normAddr = (a: string): string => (a.endsWith('/32') ? a.slice(0, -3) : a);

/** Parses one `rule add|replace ...` batch line; undefined for any other line. */
export function parseRuleLine(line: string): PodRule | undefined {
  const t = line.trim().split(/\s+/);
  if (t[0] !== 'rule' || (t[1] !== 'add' && t[1] !== 'replace')) return undefined;
  const r: PodRule = { from: 'all' };
  for (let i = 2; i < t.length - 1; i++) {
    const k = t[i]!;
    const v = t[i + 1]!;
    if (k === 'from') r.from = v === 'all' ? 'all' : normAddr(v);
    else if (k === 'to') r.to = normAddr(v);
    else if (k === 'priority' || k === 'pref' || k === 'prio' || k === 'preference') r.priority = Number(v);
    else if (k === 'lookup' || k === 'table') r.table = normTable(v);
    else continue;
    i++;
  }
  return r;
}

/** The rules `policyRoutingLines(plan)` installs for the pod (empty while it adds none). */
export function expectedPodRules(plan: WiringPlan): PodRule[] {
  return policyRoutingLines(plan).flatMap((l) => parseRuleLine(l) ?? []);
}

/** `ip rule del` lines removing exactly what `policyRoutingLines(plan)` added. */
export function podRuleDeleteLines(plan: WiringPlan): string[] {
  return policyRoutingLines(plan).flatMap((l) => (parseRuleLine(l) ? [l.trim().replace(/^rule\s+(add|replace)\b/, 'rule del')] : []));
}

/** Renders a rule the way `ip rule` would be asked for it (for messages and deletes). */
export function formatRule(r: PodRule): string {
  return [
    r.priority !== undefined ? `priority ${r.priority}` : '', r.from !== 'all' ? `from ${r.from}` : '',
    r.to ? `to ${r.to}` : '', r.table ? `lookup ${r.table}` : '',
  ].filter(Boolean).join(' ');
}

/** True when a rule of `ip -json rule show` matches `want` (priority/table only when `want` has them). */
export function ruleMatches(have: IpJson, want: PodRule): boolean {
  const src = typeof have.src === 'string' ? have.src : 'all';
  const srcLen = typeof have.srclen === 'number' ? have.srclen : 32;
  const dst = typeof have.dst === 'string' ? have.dst : undefined;
  const dstLen = typeof have.dstlen === 'number' ? have.dstlen : 32;
  if (want.priority !== undefined && have.priority !== want.priority) return false;
  if (want.from !== src || (src !== 'all' && srcLen !== 32)) return false;
  if (want.to !== dst || (dst !== undefined && dstLen !== 32)) return false;
  return want.table === undefined || normTable(String(have.table ?? '')) === want.table;
}

/**
 * Rules of `ip -json rule show` that name `ipv4` alone as source or destination (`from
 * <ip>` / `to <ip>`, /32): what a pod's policy routing left behind.
 * @returns `rule del` lines for them.
 */
export function ruleDeleteLinesFor(rules: IpJson[], ipv4: string): string[] {
  return rules.flatMap((r) => {
    const from = r.src === ipv4 && (r.srclen ?? 32) === 32;
    const to = r.dst === ipv4 && (r.dstlen ?? 32) === 32;
    if (!from && !to) return [];
    return [`rule del ${formatRule({
      ...(typeof r.priority === 'number' ? { priority: r.priority } : {}), from: from ? ipv4 : 'all', ...(to ? { to: ipv4 } : {}),
      ...(r.table !== undefined ? { table: String(r.table) } : {}),
    })}`];
  });
}
