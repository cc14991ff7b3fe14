/**
 * NodePort support (docs/design.md#nodeport-and-the-connection-mark): replies to
 * connections that came in on the primary ENI leave through the primary ENI, even from a
 * pod whose address lives on a secondary ENI. Without it, a NodePort (or load-balancer
 * instance-target) connection DNATed to such a pod is answered through the pod's ENI
 * table (prio 1536), because the routing decision for the reply is taken before its
 * un-DNAT; the pod's ENI does not own the node's address, so the VPC drops it.
 *
 * With AWS_VPC_CNI_NODE_PORT_SUPPORT (default true), as amazon-vpc-cni-k8s does:
 * - mangle PREROUTING `-i <primary if> -m addrtype --dst-type LOCAL --limit-iface-in
 *   -j CONNMARK --set-xmark M/M`: a connection that arrives on the primary ENI for a local
 *   address (a NodePort, before kube-proxy's DNAT) gets mark bit M on its conntrack entry;
 * - mangle PREROUTING `-i <veth prefix>+ -j CONNMARK --restore-mark --mask M`: a pod's
 *   packets carry their connection's mark bit as packet mark;
 * - `ip rule fwmark M/M lookup main` (netfacts/connmark.ts priority): marked packets use
 *   the main table, i.e. the primary ENI.
 * Off: all three are removed. The node's rp_filter on the primary interface must be loose
 * (set by the init container, checked by sysctl.ts). Every step converges, so re-running
 * is safe and a changed interface, prefix or mark replaces the old rules.
 */
import { CONNMARK_COMMENT, CONNMARK_RULE_PRIORITY, markHex } from '../../netfacts/connmark.js';
import { MAIN_TABLE, tableId } from '../../netfacts/routing.js';
import type { Iptables } from './iptables.js';
import type { CommandRunner } from './runner.js';

/** What the connmark rules depend on; `undefined` to {@link applyConnmark} removes them. */
export interface ConnmarkSpec {
  /** The primary ENI's interface (`eth0`, `ens5`). */
  primaryIf: string;
  /** AWS_VPC_K8S_CNI_VETHPREFIX: host-side veths are `<prefix>…`. */
  vethPrefix: string;
  /** AWS_VPC_K8S_CNI_CONNMARK: the mark bit(s), 1..0xffffffff. */
  mark: number;
}

/** The mangle PREROUTING rule specs (arguments after `-A PREROUTING`) for `s`. Pure. */
export function connmarkRuleSpecs(s: ConnmarkSpec): string[][] {
  const m = markHex(s.mark);
  const comment = ['-m', 'comment', '--comment', CONNMARK_COMMENT];
  return [
    [
      ...['-i', s.primaryIf, ...comment, '-m', 'addrtype', '--dst-type', 'LOCAL', '--limit-iface-in'],
      ...['-j', 'CONNMARK', '--set-xmark', `${m}/${m}`],
    ],
    ['-i', `${s.vethPrefix}+`, ...comment, '-j', 'CONNMARK', '--restore-mark', '--nfmask', m, '--ctmask', m],
  ];
}

/** Splits one `iptables -S` line into arguments (double quotes group, `\"` escapes). Pure. */
export function splitRuleLine(line: string): string[] {
  const out: string[] = [];
  let cur = '';
  let quoted = false;
  let any = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (c === '\\' && quoted && i + 1 < line.length) cur += line[++i];
    else if (c === '"') {
      quoted = !quoted;
      any = true;
    } else if (c === ' ' && !quoted) {
      if (cur || any) out.push(cur);
      cur = '';
      any = false;
    } else cur += c;
  }
  if (cur || any) out.push(cur);
  return out;
}

/** Our mangle PREROUTING rules now installed (arguments after `-A PREROUTING`, by comment). @throws CommandError */
async function ownedRules(ipt: Iptables): Promise<string[][]> {
  const lines = (await ipt.exec('mangle', ['-S', 'PREROUTING'])).split('\n');
  return lines
    .filter((l) => l.startsWith('-A PREROUTING ') && l.includes(`"${CONNMARK_COMMENT}"`))
    .map((l) => splitRuleLine(l).slice(2));
}

/**
 * Converges our mangle rules and the fwmark rule to `spec` (undefined: none).
 * @returns how many iptables and ip commands changed something (0 when already converged).
 * @throws CommandError when iptables (lock wait, missing CONNMARK/addrtype support) or ip fails.
 */
export async function applyConnmark(ipt: Iptables, runner: CommandRunner, spec?: ConnmarkSpec): Promise<number> {
  const want = spec ? connmarkRuleSpecs(spec) : [];
  const have = await ownedRules(ipt);
  let changes = 0;
  let converged = have.length === want.length;
  for (const w of want) if (converged && !(await ipt.hasRule('mangle', 'PREROUTING', w))) converged = false;
  if (!converged) {
    for (const h of have) {
      await ipt.exec('mangle', ['-D', 'PREROUTING', ...h]);
      changes++;
    }
    for (const w of want) {
      await ipt.exec('mangle', ['-A', 'PREROUTING', ...w]);
      changes++;
    }
  }
  return changes + (await syncFwmarkRule(runner, spec?.mark));
}

/** One row of `ip -j rule show` as far as the fwmark rule needs it. */
interface FwmarkRow {
  priority?: number;
  fwmark?: string;
  table?: string | number;
  src?: string;
  dst?: string;
}

/**
 * Converges the rules at {@link CONNMARK_RULE_PRIORITY} to exactly `fwmark M/M lookup main`
 * (none when `mark` is undefined). @returns the number of `ip rule` commands run. @throws CommandError
 */
export async function syncFwmarkRule(runner: CommandRunner, mark?: number): Promise<number> {
  const rows = (await runner.ipJson<FwmarkRow>(['-4', 'rule', 'show'])).filter(
    (r) => r.priority === CONNMARK_RULE_PRIORITY,
  );
  const m = mark === undefined ? '' : `${markHex(mark)}/${markHex(mark)}`;
  const ok = (r: FwmarkRow) =>
    r.fwmark === m && tableId(r.table ?? '') === MAIN_TABLE && (r.src ?? 'all') === 'all' && !r.dst;
  if (mark !== undefined && rows.length === 1 && ok(rows[0]!)) return 0;
  const lines = rows.map(() => `rule del prio ${CONNMARK_RULE_PRIORITY}`);
  if (mark !== undefined) lines.push(`rule add fwmark ${m} lookup main prio ${CONNMARK_RULE_PRIORITY}`);
  await runner.ipBatch(lines);
  return lines.length;
}
