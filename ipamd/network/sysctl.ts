/**
 * Kernel settings ipamd needs in the node's network namespace (docs/design.md#7-host-networking, docs/design.md#8-lessons-the-field-paid-for), which it
 * CHECKS and reports but never sets (docs/design.md#12-running-on-a-cluster item 7): a DaemonSet container sees
 * `/proc/sys` read-only unless privileged, so the chart's privileged init container
 * (`eni-ipam-node-init`, ipamd/node-init-steps.ts `setNodeSysctls`) sets them:
 *
 * | sysctl | value set by the init container | ipamd reports it wrong when |
 * |---|---|---|
 * | `net.ipv4.ip_forward` | 1 | not 1: the node does not route pod traffic at all |
 * | `net.ipv4.conf.all.rp_filter` | 2 (loose) | the effective value on the primary interface is 1 |
 * | `net.ipv4.conf.<primary if>.rp_filter` | 2 (loose) | (same check: effective = max(all, <if>)) |
 *
 * Reverse-path filtering must not be strict (1) on the primary interface: replies to
 * pods on secondary ENIs and SNATed traffic arrive on an interface other than the one the
 * main table's route to their source points at (RFC 3704 "loose mode"; ip-sysctl.rst:
 * 0 off, 1 strict, 2 loose; the value used is max(conf/all, conf/<if>)). Off (0) works
 * too and is not reported. Read as `cat /proc/sys/<key>` in slash form
 * (`net/ipv4/conf/<if>/rp_filter`, so interface names with dots work) through the runner,
 * so tests check them inside the namespace standing for the node (`/proc/sys/net` shows the
 * reader's network namespace); reading works on a read-only /proc/sys. `cat` (coreutils,
 * Essential) rather than procps' `sysctl`: the image has no procps, and on the real cluster
 * every check came back "unreadable: spawn sysctl ENOENT".
 */
import type { CommandRunner } from './runner.js';

/** Loose reverse-path filtering (ip-sysctl.rst: 0 off, 1 strict, 2 loose). */
export const RP_FILTER_LOOSE = 2;
/** Strict reverse-path filtering: breaks replies to pods on secondary ENIs. */
export const RP_FILTER_STRICT = 1;

/** Reads one sysctl (`key` in slash form, e.g. `net/ipv4/ip_forward`) as text. @throws CommandError */
export async function getSysctl(runner: CommandRunner, key: string): Promise<string> {
  if (key.split('/').includes('..')) throw new Error(`sysctl key ${key} leaves /proc/sys`);
  return (await runner.run('cat', [`/proc/sys/${key}`])).stdout.trim();
}

/** One checked setting. `value` is what the kernel reports ('' when unreadable). */
export interface SysctlCheck {
  /** Dotted name, e.g. `net.ipv4.ip_forward` (for the primary interface's rp_filter: the effective value). */
  sysctl: string;
  value: string;
  /** What ipamd needs, in words (e.g. "1", "0 or 2 (not strict)"). */
  expected: string;
  ok: boolean;
  /** When not ok: what goes wrong, for the log and /v1/status. */
  problem?: string;
}

/**
 * Reads `net.ipv4.ip_forward` and the effective `rp_filter` of `primaryIf`
 * (max(conf.all, conf.<primaryIf>)) and says which are wrong (see the module table). An
 * unreadable setting is reported as not ok, with the error. Never throws.
 */
export async function checkNodeSysctls(runner: CommandRunner, primaryIf: string): Promise<SysctlCheck[]> {
  const read = async (key: string): Promise<{ v?: string; err?: string }> => {
    try {
      return { v: await getSysctl(runner, key) };
    } catch (e) {
      return { err: (e as Error).message.split('\n')[0]!.slice(0, 200) };
    }
  };
  const out: SysctlCheck[] = [];
  const fwd = await read('net/ipv4/ip_forward');
  out.push(
    fwd.v === '1'
      ? { sysctl: 'net.ipv4.ip_forward', value: '1', expected: '1', ok: true }
      : {
          sysctl: 'net.ipv4.ip_forward',
          value: fwd.v ?? '',
          expected: '1',
          ok: false,
          problem: fwd.err
            ? `unreadable: ${fwd.err}`
            : `is ${fwd.v}: the node does not forward pod traffic (set by the privileged init container)`,
        },
  );
  const all = await read('net/ipv4/conf/all/rp_filter');
  const dev = await read(`net/ipv4/conf/${primaryIf}/rp_filter`);
  const name = `net.ipv4.conf.${primaryIf}.rp_filter`;
  const expected = `${RP_FILTER_LOOSE} (loose) or 0, effective max(all, ${primaryIf})`;
  if (all.v === undefined || dev.v === undefined) {
    out.push({ sysctl: name, value: '', expected, ok: false, problem: `unreadable: ${all.err ?? dev.err}` });
  } else {
    const eff = Math.max(Number(all.v), Number(dev.v));
    out.push(
      eff === RP_FILTER_STRICT
        ? {
            sysctl: name,
            value: String(eff),
            expected,
            ok: false,
            problem: `effective rp_filter is ${eff} (strict; all=${all.v}, ${primaryIf}=${dev.v}): replies to pods on secondary ENIs are dropped (set by the privileged init container)`,
          }
        : { sysctl: name, value: String(eff), expected, ok: true },
    );
  }
  return out;
}
