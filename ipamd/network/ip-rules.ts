/**
 * ipamd's IPv4 policy routing rules (`ip rule`, ip-rule(8)) on the shared rule model
 * (netfacts/ip-rule.ts): read the current rules, and converge the rules of one owner (a
 * priority + selector set) to a desired list with one `ip -batch` — deleting what is not
 * desired, adding what is missing. `ip rule add` refuses duplicates ("File exists"), so
 * convergence is what makes re-runs safe.
 */
import { ruleFromJson, ruleKey, ruleLine, type IpRule, type RuleJson } from '../../netfacts/ip-rule.js';
import type { CommandRunner } from './runner.js';

export { asCidr, ruleKey, ruleLine, type IpRule } from '../../netfacts/ip-rule.js';

/** The IPv4 rules now installed (`ip -4 -j rule show`). @throws CommandError */
export async function listRules(runner: CommandRunner): Promise<IpRule[]> {
  const rows = await runner.ipJson<RuleJson>(['-4', 'rule', 'show']);
  return rows.map(ruleFromJson);
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
export async function syncRules(
  runner: CommandRunner,
  owned: (r: IpRule) => boolean,
  desired: IpRule[],
): Promise<number> {
  const lines = ruleSyncLines(await listRules(runner), owned, desired);
  await runner.ipBatch(lines);
  return lines.length;
}
