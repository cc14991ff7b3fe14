/**
 * A simulated node for CNI verb tests: the simulated cloud + the real ipamd
 * (node-harness.ts), a "node" network namespace in which the real bundled plugin runs
 * (so the real host is untouched), and pod namespaces on demand. With `plugin: 'shim'`
 * the native shim is run instead and ipamd's CNI exec server wires the node side in the
 * node netns (ENI_IPAM_CNI_EXEC_NETNS; plugin-under-test.ts). Everything is removed
 * by `t.after`, even when the test fails.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { execPlugin, type CniCall, type CniOutcome } from '../../kit/cni-exec.js';
import type { IpamdProcess } from '../../kit/ipamd-process.js';
import { createNamedNetns, createProcNetns, type Netns } from '../../kit/netns.js';
import { createNode, type NodeHarness } from '../../kit/node-harness.js';
import { defaultPluginKind, pluginArgv, type PluginKind } from './plugin-under-test.js';

/** `ip <args>` inside the netns at `ns` (entered by path); resolves with stdout. */
export const ipIn = async (ns: string, args: string[]): Promise<string> =>
  (await promisify(execFile)('nsenter', [`--net=${ns}`, 'ip', ...args])).stdout;
/** `ip -json <args>` inside `ns`, parsed. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export const ipj = async (ns: string, args: string[]): Promise<any[]> =>
  JSON.parse((await ipIn(ns, ['-json', ...args])) || '[]');

/** One plugin call: the verb, the attachment, and config fields over the node's defaults. */
export type VerbCall = Omit<CniCall, 'config' | 'prefix'> & { conf?: Record<string, unknown>; rawConfig?: string };

/** A running CNI test node. */
export interface CniNode {
  h: NodeHarness;
  d: IpamdProcess;
  node: Netns;
  /** The base network config: `aws-cni`, cniVersion 1.1.0, this node's ipamd socket. */
  config: Record<string, unknown>;
  /** Which plugin build `call` runs. */
  plugin: PluginKind;
  /** Runs the plugin inside the node netns with `config` + `c.conf` (`c.plugin` overrides the build). */
  call(c: VerbCall): Promise<CniOutcome>;
  /** A fresh pod netns (`named`: /var/run/netns/..., `proc`: /proc/<pid>/ns/net), removed after the test. */
  pod(shape?: 'named' | 'proc'): Promise<Netns>;
}

let seq = 0;

/** Starts the node; `tag` keeps namespace names unique per test. */
export async function startCniNode(
  t: { after(fn: () => unknown): void },
  tag: string,
  p: { instanceType?: string; ipamdEnv?: NodeJS.ProcessEnv; plugin?: PluginKind } = {},
): Promise<CniNode> {
  const plugin = p.plugin ?? defaultPluginKind();
  const h = await createNode({
    ...(p.instanceType ? { instanceType: p.instanceType } : {}),
    ipamdEnv: { WARM_IP_TARGET: '4', ...p.ipamdEnv },
  });
  t.after(() => h.close());
  const node = await createNamedNetns(`eni-${tag}-n${process.pid}`);
  t.after(() => node.remove());
  // The exec server may serve shims in the node netns only (ipamd itself runs in the test's netns).
  h.env.ENI_IPAM_CNI_EXEC_NETNS = node.path;
  const d = await h.startIpamd();
  const config = {
    cniVersion: '1.1.0',
    name: 'aws-cni',
    type: 'eni-ipam',
    ipamdSocket: h.socket,
    mtu: 9001,
    ...(plugin === 'shim' ? { execSocket: `${h.dir}/cni-exec.sock` } : {}),
  };
  const pods: Netns[] = [];
  t.after(async () => {
    for (const x of pods) await x.remove();
  });
  return {
    h,
    d,
    node,
    config,
    plugin,
    call: (c) =>
      execPlugin({
        plugin: pluginArgv(plugin),
        ...c,
        config: c.rawConfig ?? { ...config, ...c.conf },
        prefix: ['nsenter', `--net=${node.path}`],
      }),
    async pod(shape = 'named') {
      const x =
        shape === 'named'
          ? await createNamedNetns(`eni-${tag}-p${process.pid}-${seq++}`)
          : await createProcNetns(`${tag}-proc`);
      pods.push(x);
      return x;
    },
  };
}
