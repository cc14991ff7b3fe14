/**
 * The conformance runner's pure parts: which specs the focus and skips select
 * (kit/cluster/conformance-focus.ts), the JUnit report Ginkgo v2 writes for the e2e suite
 * (kit/cluster/junit-results.ts), and the results table (kit/cluster/conformance-report.ts).
 * The fixture has Ginkgo's shape (reporters.GenerateJUnitReportWithConfig as the e2e
 * framework calls it): a filtered-out spec is `skipped` with message "skipped", a spec that
 * skipped itself "skipped - <reason>", a failure's text in the element. Spec names are real
 * v1.36.3 names. The runner's real run is `npm run conformance` (docs/conformance.md).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { classifySpec, ginkgoFocus, ginkgoSkip } from '../../kit/cluster/conformance-focus.js';
import { renderRun, summarize } from '../../kit/cluster/conformance-report.js';
import { parseJunit } from '../../kit/cluster/junit-results.js';

const S = {
  basic: '[sig-network] Services should serve a basic endpoint from pods [Conformance]',
  nodePort: '[sig-network] Services should be able to create a functioning NodePort service [Conformance]',
  sctp: '[sig-network] Networking Granular Checks: Pods should function for intra-pod communication: sctp [LinuxOnly] [Feature:SCTPConnectivity]',
  sctp2:
    '[sig-network] Networking Granular Checks: Services should function for node-Service: sctp [Feature:SCTPConnectivity]',
  lbAffinity:
    '[sig-network] LoadBalancers [Feature:LoadBalancer] should have session affinity work for LoadBalancer service with Cluster traffic policy [Slow] [LinuxOnly]',
  lbClusterIp:
    '[sig-network] Services should serve endpoints on same port and different protocol for internal traffic on Type LoadBalancer',
  sctpApi:
    '[sig-network] Services should allow creating a basic SCTP service with pod and endpoints [LinuxOnly] [Serial]',
  dualStack: '[sig-network] [Feature:IPv6DualStack] should create pod, add ipv6 and ipv4 ip to pod ips',
  ptr: '[sig-network] DNS configMap nameserver Forward PTR lookup should forward PTR records lookup to upstream nameserver [Slow] [Serial]',
  dns: '[sig-network] DNS should provide DNS for the cluster [Conformance]',
  twoNodes:
    '[sig-network] HostPort validates that there is no conflict between pods with same hostPort but different hostIP and protocol [LinuxOnly] [Conformance]',
  storage: '[sig-storage] Volumes NFSv4 should be mountable for NFSv4',
  lbTcp:
    '[sig-network] LoadBalancers [Feature:LoadBalancer] should be able to change the type and ports of a TCP service [Slow]',
};

const esc = (s: string): string =>
  s.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
const tc = (name: string, status: string, time: number, inner = ''): string =>
  `<testcase name="${esc(name)}" classname="Kubernetes e2e suite" status="${status}" time="${time}">${inner}</testcase>`;

const JUNIT = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="9" disabled="6" errors="0" failures="1" time="312.5">
  <testsuite name="Kubernetes e2e suite" package="/x" tests="9" disabled="0" skipped="6" errors="0" failures="1" time="312.5" timestamp="2026-12-07T11:00:00">
    <properties><property name="SuiteSucceeded" value="false"></property></properties>
    ${tc('[SynchronizedBeforeSuite]', 'passed', 2.1)}
    ${tc(`[It] ${S.basic}`, 'passed', 21.4)}
    ${tc(
      `[It] ${S.nodePort}`,
      'failed',
      40,
      `<failure type="failed">[FAILED] service is not reachable within 2m0s timeout on endpoint 10.0.1.5:31234 over TCP protocol&#xA;In [It] at: k8s.io/kubernetes/test/e2e/network/service.go:1301 @ 12/07/26 11:03:00</failure>`,
    )}
    ${tc(`[It] ${S.sctp}`, 'skipped', 0, '<skipped message="skipped"></skipped>')}
    ${tc(`[It] ${S.sctp2}`, 'skipped', 0, '<skipped message="skipped"></skipped>')}
    ${tc(`[It] ${S.lbAffinity}`, 'skipped', 0, '<skipped message="skipped"></skipped>')}
    ${tc(`[It] ${S.ptr}`, 'skipped', 0, '<skipped message="skipped"></skipped>')}
    ${tc(`[It] ${S.dns}`, 'passed', 12.9)}
    ${tc(`[It] ${S.twoNodes}`, 'skipped', 0.4, '<skipped message="skipped - Requires at least 2 nodes (not 1)"></skipped>')}
    ${tc(`[It] ${S.storage}`, 'skipped', 0, '<skipped message="skipped"></skipped>')}
    ${tc('[ReportAfterSuite] Kubernetes e2e suite report', 'passed', 0.1)}
  </testsuite>
</testsuites>`;

test('the focus selects the issue-38 sets; the skips leave out SCTP sockets, cloud load balancers, the other family', () => {
  assert.deepEqual(classifySpec(S.basic, 'all', 'ipv4'), { kind: 'selected' });
  assert.deepEqual(classifySpec(S.dns, 'conformance', 'ipv4'), { kind: 'selected' });
  assert.equal(classifySpec(S.storage, 'all', 'ipv4').kind, 'unfocused');
  // Only what needs the missing piece is left out: an SCTP Service's API and rules, and a
  // LoadBalancer Service's ClusterIP, run.
  assert.deepEqual(classifySpec(S.sctpApi, 'all', 'ipv4'), { kind: 'selected' });
  assert.deepEqual(classifySpec(S.lbClusterIp, 'all', 'ipv4'), { kind: 'selected' });
  assert.equal(classifySpec(S.dualStack, 'all', 'ipv4').kind, 'unfocused');
  assert.deepEqual(classifySpec(S.dualStack, 'all', 'dual'), { kind: 'selected' });
  const sctp = classifySpec(S.sctp, 'all', 'ipv4');
  assert.equal(sctp.kind === 'left-out' && sctp.rule.fair, true);
  assert.match(sctp.kind === 'left-out' ? sctp.rule.reason : '', /no SCTP/);
  assert.match(JSON.stringify(classifySpec(S.lbAffinity, 'all', 'ipv4')), /cloud load balancer/);
  assert.match(JSON.stringify(classifySpec(S.ptr, 'all', 'ipv6')), /needs the internet/);
  // What Ginkgo is given is the same alternation the classifier reads (RE2 and JS agree on it).
  assert.ok(new RegExp(ginkgoFocus('all', 'ipv4')).test(S.nodePort));
  assert.ok(new RegExp(ginkgoSkip()).test(S.sctp));
  assert.ok(!new RegExp(ginkgoSkip()).test(S.basic));
});

test("parseJunit: specs by full name and state, a spec's own skip reason, the failure text", () => {
  const r = parseJunit(JUNIT);
  assert.equal(r.specs.length, 9);
  assert.deepEqual(r.suiteFailures, []);
  const byName = new Map(r.specs.map((s) => [s.name, s]));
  assert.equal(byName.get(S.basic)!.state, 'passed');
  assert.equal(byName.get(S.basic)!.seconds, 21.4);
  assert.equal(byName.get(S.twoNodes)!.skipReason, 'Requires at least 2 nodes (not 1)');
  assert.equal(byName.get(S.sctp)!.skipReason, undefined, 'filtered out, not skipped by itself');
  assert.match(byName.get(S.nodePort)!.failure!, /TCP protocol\nIn \[It\] at: /, 'numeric references decoded');
  assert.throws(() => parseJunit('<html></html>'), /not a JUnit report/);
});

test('summarize and render: counts, the failure line, skips grouped by reason with fairness', () => {
  const s = summarize(parseJunit(JUNIT), 'all', 'ipv4');
  assert.deepEqual(s.counts, { selected: 4, passed: 2, failed: 1, skippedBySpec: 1, leftOut: 4, notRun: 0 });
  const md = renderRun(s, {
    set: 'all',
    family: 'ipv4',
    nodes: 1,
    procs: 4,
    ginkgoMs: 312_500,
    totalMs: 600_000,
    date: '2026-12-07',
    e2eVersion: 'v1.36.3',
    imageFailures: [],
  });
  assert.match(md, /^### ipv4, 1 node, set `all` \(2026-12-07, e2e\.test v1\.36\.3\)/);
  assert.match(md, /\| passed \| 2 \|/);
  assert.match(md, /\| failed \| 1 \|/);
  assert.match(md, /\| minutes: ginkgo \(4 procs\) \/ whole run \| 5\.2 \/ 10\.0 \|/);
  assert.match(md, /functioning NodePort service \[Conformance\] \| failed \| \[FAILED\] service is not reachable/);
  assert.match(md, /\| Requires at least 2 nodes \(not 1\) \| \[sig-network\] HostPort/);
  assert.match(md, /no SCTP .* \| yes \| 2: .*<br>/, 'one row per reason');
  assert.match(md, /no ELB \| yes \| 1: \[sig-network\] LoadBalancers/);
  assert.doesNotMatch(md, /nothing lost/, 'no row when the check did not run');
  const lost = renderRun(s, {
    set: 'all',
    family: 'ipv4',
    nodes: 1,
    procs: 4,
    ginkgoMs: 1,
    totalMs: 1,
    date: '2026-12-07',
    e2eVersion: 'v1.36.3',
    imageFailures: [],
    afterSuite: { pods: 2, problems: ['ipamd has 10.0.1.9 on eni-1; EC2 has it on no ENI'] },
  });
  assert.match(
    lost,
    /nothing lost \(the nodes' ipamds hold exactly the 2 live pods' IPv4 addresses.*\| \*\*no\*\*: 1 problems \|/,
  );
  assert.match(lost, /Lost after the suite:\n\n- ipamd has 10\.0\.1\.9 on eni-1; EC2 has it on no ENI/);
});
