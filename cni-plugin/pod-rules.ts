/**
 * The pod's ip rules for CHECK, DEL and GC, on the shared rule model
 * (netfacts/ip-rule.ts `podRules`: prio 512 `to <ip> lookup main`, prio 1536 `from <ip>
 * lookup <eni table>`): CHECK verifies and DEL/GC remove exactly the rules ADD installs
 * (the same data wiring.ts renders), and any rule naming a pod IP is found when the table
 * is not known (DEL without ipamd).
 */
import { asCidr, podRules, ruleFromJson, ruleLine, sameRule, type IpRule, type RuleJson } from '../netfacts/ip-rule.js';
import type { IpJson } from '../netfacts/ip-query.js';
import { tableName } from '../netfacts/routing.js';
import type { WiringPlan } from './wiring-plan.js';

/** The rules ADD installs for the pod of `plan` (its IP and the ENI's route table). */
export function expectedPodRules(plan: Pick<WiringPlan, 'ipv4' | 'routeTableId'>): IpRule[] {
  return plan.ipv4 ? podRules(plan.ipv4, plan.routeTableId) : []; // an IPv6-only pod has no IPv4 rules
}

/** `ip rule del` lines removing exactly what ADD added for `plan`. */
export function podRuleDeleteLines(plan: Pick<WiringPlan, 'ipv4' | 'routeTableId'>): string[] {
  return expectedPodRules(plan).map((r) => ruleLine('del', r, { tableNames: true }));
}

const bare = (a: string): string => (a.endsWith('/32') ? a.slice(0, -3) : a);

/**
 * A rule the way `ip rule` is asked for it, for messages and deletes, e.g.
 * `priority 1536 from 10.0.0.7 lookup 3` (host addresses without `/32`, tables by name).
 */
export function formatRule(r: IpRule): string {
  const action = r.nop
    ? 'nop'
    : r.goto !== undefined
      ? `goto ${r.goto}`
      : r.table !== undefined
        ? `lookup ${tableName(r.table)}`
        : '';
  return [
    Number.isFinite(r.priority) ? `priority ${r.priority}` : '',
    r.not ? 'not' : '',
    r.from ? `from ${bare(r.from)}` : '',
    r.to ? `to ${bare(r.to)}` : '',
    action,
  ]
    .filter(Boolean)
    .join(' ');
}

/** True when a rule of `ip -json rule show` is the rule `want`. */
export function ruleMatches(have: IpJson, want: IpRule): boolean {
  return sameRule(ruleFromJson(have as RuleJson), want);
}

/**
 * Rules of `ip -json rule show` that name `ipv4` alone (/32) as source or destination
 * (`from <ip>` / `to <ip>`): what a pod's policy routing left behind.
 * @returns `rule del` lines for them.
 */
export function ruleDeleteLinesFor(rules: IpJson[], ipv4: string): string[] {
  const ip = asCidr(ipv4);
  return rules
    .map((j) => ruleFromJson(j as RuleJson))
    .filter((r) => r.from === ip || r.to === ip)
    .map((r) => `rule del ${formatRule(r)}`);
}
