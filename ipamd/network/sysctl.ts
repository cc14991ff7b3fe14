/**
 * Kernel settings ipamd needs in the node's network namespace (DESIGN §7): IPv4
 * forwarding on, and loose reverse-path filtering (`rp_filter=2`, RFC 3704 "loose
 * mode", ip-sysctl.rst) on the primary interface, because replies to pods on secondary
 * ENIs and SNATed traffic arrive on an interface other than the one the main table's
 * route to their source points at. Written with `sysctl -w` in slash form
 * (`net/ipv4/conf/<if>/rp_filter`) so interface names containing dots work; through the
 * runner, so tests set them inside the namespace standing for the node.
 */
import type { CommandRunner } from './runner.js';

/** Loose reverse-path filtering (ip-sysctl.rst: 0 off, 1 strict, 2 loose). */
export const RP_FILTER_LOOSE = 2;

/** Sets one sysctl (`key` in slash form, e.g. `net/ipv4/ip_forward`) to `value`. @throws CommandError */
export async function setSysctl(runner: CommandRunner, key: string, value: string | number): Promise<void> {
  await runner.run('sysctl', ['-q', '-w', `${key}=${value}`]);
}

/** Reads one sysctl (`key` in slash form) as text. @throws CommandError */
export async function getSysctl(runner: CommandRunner, key: string): Promise<string> {
  return (await runner.run('sysctl', ['-n', key])).stdout.trim();
}

/**
 * `net.ipv4.ip_forward=1` and `net.ipv4.conf.<primaryIf>.rp_filter=2`.
 * @throws CommandError (e.g. no such interface).
 */
export async function applyNodeSysctls(runner: CommandRunner, primaryIf: string): Promise<void> {
  await setSysctl(runner, 'net/ipv4/ip_forward', 1);
  await setSysctl(runner, `net/ipv4/conf/${primaryIf}/rp_filter`, RP_FILTER_LOOSE);
}
