/**
 * IPv4 policy routing rules (`ip rule`, ip-rule(8)) as data: one model for the rules the
 * plugin installs per pod and ipamd per node and per ENI, rendered to `ip -batch` lines
 * and read back from `ip -json rule show` — never by parsing the text lines that were
 * generated. Pure; priorities and tables in routing.ts.
 */
import { FROM_POD_PRIORITY, MAIN_TABLE, TO_POD_PRIORITY, tableId, tableName } from './routing.js';

/** One rule. Addresses are CIDRs (`10.0.0.20/32`; a bare address means /32); unset `from`/`to` mean "all". */
export interface IpRule {
  priority: number;
  from?: string;
  to?: string;
  /** Inverts the selector (`not`). */
  not?: boolean;
  /** Action: route table id (254 = main)... */
  table?: number;
  /** ...or jump to the rule with this priority... */
  goto?: number;
  /** ...or do nothing (a `goto` target). */
  nop?: boolean;
}

/** One rule of `ip -json rule show` (iproute2 ≥ 5). */
export interface RuleJson {
  priority?: number;
  src?: string;
  srclen?: number;
  dst?: string;
  dstlen?: number;
  not?: null;
  table?: string | number;
  goto?: number;
  nop?: null;
}

/** Normalises an address or CIDR to `a.b.c.d/len` (a bare address is /32). */
export function asCidr(a: string): string {
  return a.includes('/') ? a : `${a}/32`;
}

const cidr = (addr: string | undefined, len: number | undefined): string | undefined =>
  addr === undefined || addr === 'all' ? undefined : `${addr}/${len ?? 32}`;

/**
 * The rule a row of `ip -json rule show` describes (table names → ids, `src`/`srclen`
 * → `from` CIDR). A row without a numeric priority gets NaN (callers reading evidence refuse it).
 */
export function ruleFromJson(j: RuleJson): IpRule {
  const r: IpRule = { priority: typeof j.priority === 'number' ? j.priority : NaN };
  const from = cidr(j.src, j.srclen);
  const to = cidr(j.dst, j.dstlen);
  if (from) r.from = from;
  if (to) r.to = to;
  if (j.not !== undefined) r.not = true;
  if (j.nop !== undefined) r.nop = true;
  else if (j.goto !== undefined) r.goto = j.goto;
  else if (j.table !== undefined) r.table = tableId(j.table);
  return r;
}

/** Canonical text of a rule, used to compare current with desired. */
export function ruleKey(r: IpRule): string {
  const action = r.nop ? 'nop' : r.goto !== undefined ? `goto ${r.goto}` : `lookup ${r.table}`;
  return `${r.priority}${r.not ? ' not' : ''} from ${r.from ? asCidr(r.from) : 'all'} to ${r.to ? asCidr(r.to) : 'all'} ${action}`;
}

/**
 * The `ip -batch` line that adds (`add`) or deletes (`del`) rule `r`, e.g.
 * `rule add from 10.0.0.6/32 lookup 2 prio 1535`. With `tableNames`, tables iproute2
 * has names for are written by name (`lookup main`), as the plugin always wrote its pod rules.
 */
export function ruleLine(verb: 'add' | 'del', r: IpRule, o: { tableNames?: boolean } = {}): string {
  const parts = ['rule', verb];
  if (r.not) parts.push('not');
  if (r.from) parts.push('from', asCidr(r.from));
  if (r.to) parts.push('to', asCidr(r.to));
  if (r.nop) parts.push('nop');
  else if (r.goto !== undefined) parts.push('goto', String(r.goto));
  else parts.push('lookup', o.tableNames && r.table !== undefined ? tableName(r.table) : String(r.table));
  parts.push('prio', String(r.priority));
  return parts.join(' ');
}

/**
 * The pod's ip rules (docs/design.md#1-the-parts-and-how-a-pod-gets-its-ip, step 4): prio
 * 512 `to <ip>/32 lookup main` always (traffic to the pod reaches its host veth whatever
 * other tables say), and, when the IP belongs to a secondary ENI (`routeTableId` not 254;
 * 0 = unset counts as main), prio 1536 `from <ip>/32 lookup <routeTableId>` so the pod's
 * traffic leaves through that ENI.
 */
export function podRules(ipv4: string, routeTableId: number): IpRule[] {
  const rules: IpRule[] = [{ priority: TO_POD_PRIORITY, to: asCidr(ipv4), table: MAIN_TABLE }];
  if (routeTableId > 0 && routeTableId !== MAIN_TABLE)
    rules.push({ priority: FROM_POD_PRIORITY, from: asCidr(ipv4), table: routeTableId });
  return rules;
}

/** True when `have` is the same rule as `want` (addresses compared as CIDRs, tables as ids). */
export function sameRule(have: IpRule, want: IpRule): boolean {
  return ruleKey(have) === ruleKey(want);
}
