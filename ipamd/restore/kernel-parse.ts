/**
 * The node's kernel as restore evidence (docs/design.md#4-restore-after-restart rule 5), the pure half: parses the
 * output of one `ip -json -batch -` run of `route show table main`, `link show type veth`
 * and `rule show` (iproute2 ≥ 5, each command printing one JSON array, one per line)
 * into the pod IPs the kernel shows wired.
 *
 * A pod IP is **vouched for by the kernel** when the main table holds a host route
 * `<ip>/32 dev <veth>` whose device is a veth whose peer lives in another network
 * namespace (`ip -j link` prints `link_netnsid` for such a veth, and `link` (the peer's
 * name) when the peer is in the same namespace). The CNI plugin wires exactly that
 * (cni-plugin/wiring.ts) and the kernel deletes the veth, and with it the route, when
 * the pod's namespace goes away, so the route cannot outlive the pod.
 *
 * The pod's ip rules (`to <ip>/32 lookup main`, `from <ip>/32 lookup <table>`) are
 * reported beside it (`rules`), but a rule alone vouches for nothing: rules are bound
 * to no device, so after a pod namespace vanished without a CNI DEL they stay forever
 * and would keep a genuinely leaked allocation from ever being released.
 *
 * Anything that is not exactly that shape makes the whole read fail
 * ({@link KernelParseError}): the caller then counts the kernel as unreadable and
 * freezes releases, never as "no pods".
 */
import ipaddr from 'ipaddr.js';
import { routeFromJson, type RouteJson } from '../../netfacts/ip-route.js';
import { ruleFromJson, type RuleJson } from '../../netfacts/ip-rule.js';

/** One pod IP the kernel shows wired. */
export interface KernelPodRoute {
  /** IPv4 dotted quad of the `/32` host route, or canonical IPv6 of a `/128` one. */
  ip: string;
  /** Host-side veth name (`dev` of the route). */
  dev: string;
  /** ip rules naming this IP (`to` or `from`, as `/32` or bare), 0 if none. */
  rules: number;
}

/** The kernel's view of the node's pods. */
export interface KernelEvidence {
  /** Pod IPs wired to a veth whose peer is in another netns, by IP. */
  pods: Map<string, KernelPodRoute>;
  /** Veths whose peer is in another netns (pod veths), whether or not a route names them. */
  podVeths: number;
  /** IPs that only ip rules name (no route to a pod veth): leftovers or half-done wiring; informational. */
  rulesOnly: string[];
  /** The pod veths' names (for {@link addKernelV6Routes}); absent in hand-made evidence. */
  podVethNames?: ReadonlySet<string>;
}

/** The `ip -json -batch -` input that {@link parseKernelOutput} expects, one command a line. */
export const KERNEL_BATCH = 'route show table main\nlink show type veth\nrule show\n';

/** The output of `ip -json` was not what iproute2 prints; `message` says what and where. */
export class KernelParseError extends Error {
  override name = 'KernelParseError';
}

type Json = Record<string, unknown>;

/**
 * Splits the batch output into its top-level JSON arrays. iproute2 prints one array
 * per command, one per line; a command that printed nothing (old iproute2 with an
 * empty table) is not accepted: the caller must see exactly three arrays.
 * @throws KernelParseError if a line is not a JSON array of objects.
 */
function arrays(text: string): Json[][] {
  const out: Json[][] = [];
  for (const [n, line] of text.split('\n').entries()) {
    if (line.trim() === '') continue;
    let v: unknown;
    try {
      v = JSON.parse(line);
    } catch (e) {
      throw new KernelParseError(
        `ip -json output line ${n + 1} is not JSON (${(e as Error).message}): ${line.slice(0, 80)}`,
      );
    }
    if (!Array.isArray(v) || v.some((x) => typeof x !== 'object' || x === null || Array.isArray(x))) {
      throw new KernelParseError(`ip -json output line ${n + 1} is not an array of objects: ${line.slice(0, 80)}`);
    }
    out.push(v as Json[]);
  }
  return out;
}

/** `10.0.0.5` or `10.0.0.5/32` → `10.0.0.5`; undefined for anything else (other prefixes, IPv6, `default`). */
function hostIpv4(dst: unknown): string | undefined {
  if (typeof dst !== 'string') return undefined;
  const [addr, len, extra] = dst.split('/');
  if (extra !== undefined || (len !== undefined && len !== '32')) return undefined;
  return addr !== undefined && ipaddr.IPv4.isValidFourPartDecimal(addr) ? addr : undefined;
}

/**
 * Parses the three arrays of one `ip -json -batch -` run of {@link KERNEL_BATCH}.
 * @param text stdout of `ip -json -batch -` (UTF-8).
 * @returns the pod IPs the kernel vouches for, the number of pod veths, and rule-only IPs.
 * @throws KernelParseError when the output is not three JSON arrays of the expected
 *   objects (a route without `dst`, a link without `ifname`, a rule without `priority`).
 */
export function parseKernelOutput(text: string): KernelEvidence {
  const parts = arrays(text);
  if (parts.length !== 3)
    throw new KernelParseError(
      `expected 3 JSON arrays from ip -json -batch (routes, veths, rules), got ${parts.length}`,
    );
  const [routes, links, rules] = parts as [Json[], Json[], Json[]];
  const podVeths = new Set<string>();
  for (const l of links) {
    if (typeof l['ifname'] !== 'string')
      throw new KernelParseError(`ip -json link entry without ifname: ${JSON.stringify(l).slice(0, 120)}`);
    // link_netnsid: the peer is in another netns. Its absence (and a `link` name) means a local pair.
    if (typeof l['link_netnsid'] === 'number') podVeths.add(l['ifname']);
  }
  const ruleCount = new Map<string, number>();
  for (const r of rules) {
    if (typeof r['priority'] !== 'number')
      throw new KernelParseError(`ip -json rule entry without priority: ${JSON.stringify(r).slice(0, 120)}`);
    const rule = ruleFromJson(r as RuleJson); // the shared rule model (netfacts/ip-rule.ts): selectors as CIDRs
    const ips = new Set([hostIpv4(rule.to), hostIpv4(rule.from)].filter((x): x is string => !!x));
    for (const ip of ips) ruleCount.set(ip, (ruleCount.get(ip) ?? 0) + 1);
  }
  const pods = new Map<string, KernelPodRoute>();
  for (const r of routes) {
    if (typeof r['dst'] !== 'string')
      throw new KernelParseError(`ip -json route entry without dst: ${JSON.stringify(r).slice(0, 120)}`);
    const route = routeFromJson(r as RouteJson); // the shared route model (netfacts/ip-route.ts)
    const ip = hostIpv4(route.dst);
    const dev = route.dev;
    if (!ip || dev === undefined || !podVeths.has(dev) || route.type !== 'unicast') continue;
    pods.set(ip, { ip, dev, rules: ruleCount.get(ip) ?? 0 });
  }
  const rulesOnly = [...ruleCount.keys()].filter((ip) => !pods.has(ip)).sort();
  return { pods, podVeths: podVeths.size, rulesOnly, podVethNames: podVeths };
}

/** The IPv6 route table, one `ip -6 -json -batch -` run: the command a line. */
export const KERNEL_V6_BATCH = 'route show table main\n';

/** `2600::a` or `2600::a/128` → canonical `2600::a`; undefined for anything else (other prefixes, IPv4, `default`). */
function hostIpv6(dst: unknown): string | undefined {
  if (typeof dst !== 'string') return undefined;
  const [addr, len, extra] = dst.split('/');
  if (extra !== undefined || (len !== undefined && len !== '128')) return undefined;
  return addr !== undefined && ipaddr.IPv6.isValid(addr) ? ipaddr.IPv6.parse(addr).toString() : undefined;
}

/**
 * Adds the IPv6 pods of `ip -6 -json route show table main` to `k` (in place): a `/128`
 * unicast host route to one of `k`'s pod veths (a peer in another netns) vouches for the
 * pod's address, as a `/32` does for IPv4 (the plugin's node side, cni-plugin/wiring-v6.ts,
 * and the kernel drops it with the veth). Keys are canonical (`ipaddr.js`), `rules` 0.
 * @param text stdout of `ip -6 -json -batch -` running {@link KERNEL_V6_BATCH}.
 * @throws KernelParseError when the output is not one JSON array of routes with `dst`,
 *   or `k` does not carry its pod veths' names.
 */
export function addKernelV6Routes(k: KernelEvidence, text: string): KernelEvidence {
  const parts = arrays(text);
  if (parts.length !== 1)
    throw new KernelParseError(`expected 1 JSON array from ip -6 -json -batch (routes), got ${parts.length}`);
  if (!k.podVethNames) throw new KernelParseError('the IPv4 read did not carry the pod veths');
  for (const r of parts[0]!) {
    if (typeof r['dst'] !== 'string')
      throw new KernelParseError(`ip -6 -json route entry without dst: ${JSON.stringify(r).slice(0, 120)}`);
    const route = routeFromJson(r as RouteJson);
    // The raw `dst`: the shared model writes a bare destination as an IPv4 `/32`.
    const ip = hostIpv6(r['dst']);
    const dev = route.dev;
    if (!ip || dev === undefined || !k.podVethNames.has(dev) || route.type !== 'unicast') continue;
    k.pods.set(ip, { ip, dev, rules: 0 });
  }
  return k;
}
