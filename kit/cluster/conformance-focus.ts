/**
 * Which of Kubernetes' e2e specs `npm run conformance` runs (issue #38: the `[sig-network]`
 * conformance set, the Networking Granular Checks, HostPort, the Services tests and DNS),
 * and which of those it leaves out, each with its reason. The regular expressions are
 * matched by Ginkgo (Go RE2) against a spec's full text, and by
 * {@link classifySpec} (JavaScript) against the JUnit names: keep them to the syntax both
 * share. Pure.
 */
import type { ClusterIpFamily } from './ip-family.js';

/** A set of specs the runner asks for. */
export interface FocusSet {
  label: string;
  pattern: string;
}

/** A rule that leaves specs out, and why. */
export interface SkipRule {
  pattern: string;
  reason: string;
  /** True when the reason is outside eni-ipam's job (no such cloud or kernel feature here). */
  fair: boolean;
}

/** `all`: everything the issue names; `conformance`: the `[sig-network]` `[Conformance]` set (what CI runs). */
export type ConformanceSet = 'all' | 'conformance';

const CONFORMANCE: FocusSet = { label: '[sig-network] [Conformance]', pattern: '\\[sig-network\\].*\\[Conformance\\]' };

/** The focus sets of `set` on a cluster of `family` (dual: the dual-stack specs too). */
export function focusSets(set: ConformanceSet, family: ClusterIpFamily): FocusSet[] {
  if (set === 'conformance') return [CONFORMANCE];
  const sets = [
    CONFORMANCE,
    { label: 'Networking Granular Checks', pattern: '\\[sig-network\\] Networking Granular Checks' },
    { label: 'HostPort', pattern: '\\[sig-network\\] HostPort' },
    {
      label: 'Services (ClusterIP, NodePort, session affinity, traffic policies)',
      pattern: '\\[sig-network\\] Services ',
    },
    { label: 'DNS', pattern: '\\[sig-network\\] DNS' },
    // The external-traffic tests of a Service of type LoadBalancer: selected so that the
    // skip below names each of them.
    { label: 'LoadBalancers (external traffic)', pattern: '\\[sig-network\\] LoadBalancers' },
  ];
  if (family === 'dual')
    sets.push({ label: 'IPv6DualStack', pattern: '\\[sig-network\\] \\[Feature:IPv6DualStack\\]' });
  return sets;
}

/**
 * The runner's skip rules: only specs that need something this machine or the simulated
 * cloud lacks, never one that needs something eni-ipam should do.
 */
export const SKIP_RULES: readonly SkipRule[] = [
  {
    pattern: '\\[Feature:SCTPConnectivity\\]',
    reason:
      'opens SCTP sockets; this kernel has no SCTP (CONFIG_IP_SCTP not set: `agnhost netexec --sctp-port` fails with "protocol not supported")',
    fair: true,
  },
  {
    pattern: '\\[Feature:LoadBalancer\\]',
    reason:
      'needs a cloud load balancer provisioned for a Service of type LoadBalancer; the simulated cloud has no ELB',
    fair: true,
  },
  {
    pattern: 'Forward PTR lookup',
    reason:
      "first resolves the PTR record of 8.8.8.8 (IPv6: 2001:4860:4860::8888), dns.google, through the cluster DNS's upstream: needs the internet, which nothing here may reach",
    fair: true,
  },
];

/** Ginkgo's `--focus` for `set` and `family`: one alternation of the sets' patterns. */
export function ginkgoFocus(set: ConformanceSet, family: ClusterIpFamily): string {
  return focusSets(set, family)
    .map((f) => `(${f.pattern})`)
    .join('|');
}

/** Ginkgo's `--skip`: one alternation of the rules' patterns. */
export function ginkgoSkip(): string {
  return SKIP_RULES.map((r) => `(${r.pattern})`).join('|');
}

/** Where a spec stands: outside the focus, left out by a rule, or selected to run. */
export type SpecSelection = { kind: 'unfocused' } | { kind: 'left-out'; rule: SkipRule } | { kind: 'selected' };

/** Classifies spec `name` (its full text) as Ginkgo's `--focus`/`--skip` of `set` and `family` do. */
export function classifySpec(name: string, set: ConformanceSet, family: ClusterIpFamily): SpecSelection {
  if (!focusSets(set, family).some((f) => new RegExp(f.pattern).test(name))) return { kind: 'unfocused' };
  const rule = SKIP_RULES.find((r) => new RegExp(r.pattern).test(name));
  return rule ? { kind: 'left-out', rule } : { kind: 'selected' };
}
