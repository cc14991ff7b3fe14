/**
 * IPv4 policy routing rules (`ip rule`, ip-rule(8)) as data: read the current rules,
 * and converge the rules of one owner (a priority + selector set) to a desired list with
 * one `ip -batch` — deleting what is not desired, adding what is missing. `ip rule add`
 * refuses duplicates ("File exists"), so convergence is what makes re-runs safe.
 */
import type { CommandRunner } from './runner.js';

/** One rule. Addresses are CIDRs (`10.0.0.20/32`); unset `from`/`to` mean "all". */
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

/** Route table names iproute2 prints, by id (rt_tables(5)). */
const TABLE_IDS: Record<string, number> = { local: 255, main: 254, default: 253 };

interface RuleJson {
  priority: number; src?: string; srclen?: number; dst?: string; dstlen?: number;
  not?: null; table?: string; goto?: number; nop?: null;
}

const cidr = (addr: string | undefined, len: number | undefined): string | undefined =>
  addr === undefined || addr === 'all' ? undefined : `${addr}/${len ?? 32}`;

/** Normalises an address or CIDR to `a.b.c.d/len` (a bare address is /32). */
export function asCidr(a: string): string {
  return a.includes('/') ? a : `${a}/32`;
}

/** Canonical text of a rule, used to compare current with desired. */
export function ruleKey(r: IpRule): string {
  const action = r.nop ? 'nop' : r.goto !== undefined ? `goto ${r.goto}` : `lookup ${r.table}`;
  return `${r.priority}${r.not ? ' not' : ''} from ${r.from ? asCidr(r.from) : 'all'} to ${r.to ? asCidr(r.to) : 'all'} ${action}`;
}

/** The `ip -batch` line that adds (`add`) or deletes (`del`) rule `r`. */
export function ruleLine(verb: 'add' | 'del', r: IpRule): string {
  const parts = ['rule', verb];
  if (r.not) parts.push('not');
  if (r.from) parts.push('from', asCidr(r.from));
  if (r.to) parts.push('to', asCidr(r.to));
  if (r.nop) parts.push('nop');
  else if (r.goto !== undefined) parts.push('goto', String(r.goto));
  else parts.push('lookup', String(r.table));
  parts.push('prio', String(r.priority));
  return parts.join(' ');
}

/** The IPv4 rules now installed (`ip -4 -j rule show`). @throws CommandError */
export async function listRules(runner: CommandRunner): Promise<IpRule[]> {
  const rows = await runner.ipJson<RuleJson>(['-4', 'rule', 'show']);
  return rows.map((j) => {
    const r: IpRule = { priority: j.priority };
    const from = cidr(j.src, j.srclen);
    const to = cidr(j.dst, j.dstlen);
    if (from) r.from = from;
    if (to) r.to = to;
    if (j.not !== undefined) r.not = true;
    if (j.nop !== undefined) r.nop = true;
    else if (j.goto !== undefined) r.goto = j.goto;
    else if (j.table !== undefined) r.table = TABLE_IDS[j.table] ?? Number(j.table);
    return r;
  });
}

/**
 * The `ip -batch` lines that converge the rules selected by `owned` (out of `current`) to
 * exactly `desired`, each once: deletes of owned rules that are not desired (and of
 * duplicates) first, then adds of the missing ones. Rules not selected are never touched.
 * Pure; empty when nothing has to change.
 */
export function ruleSyncLines(current: IpRule[], owned: (r: IpRule) => boolean, desired: IpRule[]): string[] {
  const want = new Map(desired.map((r) => [ruleKey(r), r]));
  const seen = new Set<string>();
  const del: IpRule[] = [];
  for (const r of current.filter(owned)) {
    const k = ruleKey(r);
    if (want.has(k) && !seen.has(k)) seen.add(k);
    else del.push(r);
  }
  const add = [...want].filter(([k]) => !seen.has(k)).map(([, r]) => r);
  return [...del.map((r) => ruleLine('del', r)), ...add.map((r) => ruleLine('add', r))];
}

/**
 * Reads the current rules and applies {@link ruleSyncLines} in one `ip -batch`.
 * @returns the number of `ip rule` commands run (0 when already converged). @throws CommandError
 */
export async function syncRules(runner: CommandRunner, owned: (r: IpRule) => boolean, desired: IpRule[]): Promise<number> {
  const lines = ruleSyncLines(await listRules(runner), owned, desired);
  await runner.ipBatch(lines);
  return lines.length;
}
