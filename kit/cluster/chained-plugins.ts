/**
 * What the cluster test's chained-plugins step runs and reads (docs/design.md#chained-plugins):
 * a bare echo pod with a hostPort or a bandwidth annotation, the conflist ipamd installed,
 * and the node's nat rules and ifb qdiscs as portmap and bandwidth left them.
 */
import { readFileSync } from 'node:fs';
import { run } from '../netns.js';
import type { TestCluster } from './cluster.js';
import { echoPodSpec } from './workload.js';

/** An echo Pod `name` (label app=`name`), its port mapped on the node when `hostPort` is given, with `annotations`. */
export function echoPod(
  c: TestCluster,
  name: string,
  o: { hostPort?: number; annotations?: Record<string, string> } = {},
): object {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: 'default', labels: { app: name }, annotations: o.annotations ?? {} },
    spec: echoPodSpec(c, o),
  };
}

/** The plugin types of the conflist ipamd installed on the node, in chain order. */
export function installedChain(c: TestCluster): string[] {
  const doc = JSON.parse(readFileSync(c.host('/etc/cni/net.d/05-eni-ipam.conflist'), 'utf8')) as {
    plugins: Array<{ type: string }>;
  };
  return doc.plugins.map((p) => p.type);
}

/** The node's nat table (`iptables -t nat -S`). */
export const nodeNatRules = (c: TestCluster): Promise<string> =>
  run('nsenter', [`--net=${c.nodeNetns.path}`, 'iptables', '-w', '-t', 'nat', '-S']);

/** `tc qdisc show` of every ifb device on the node (bandwidth's egress shaping), one string. */
export async function nodeIfbQdiscs(c: TestCluster): Promise<string> {
  const links = JSON.parse(
    (await run('nsenter', [`--net=${c.nodeNetns.path}`, 'ip', '-json', 'link', 'show', 'type', 'ifb'])) || '[]',
  ) as Array<{ ifname: string }>;
  let out = '';
  for (const l of links)
    out += await run('nsenter', [`--net=${c.nodeNetns.path}`, 'tc', 'qdisc', 'show', 'dev', l.ifname]);
  return out;
}
