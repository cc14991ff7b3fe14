/**
 * The options of `npm run cluster -- up`, checked before anything starts: `--nodes N` (a whole
 * number from 1 to what this machine can hold), `--instance-types t1,t2,…` (EC2 types the
 * simulated cloud knows, first node first) and `--ip-family ipv4|ipv6|dual`. Pure but for the
 * machine's memory, read from /proc/meminfo.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { instanceTypeInfo } from '../../sim/index.js';
import type { ClusterOptions } from './cluster.js';

/** Memory the control plane takes (etcd, kube-apiserver, controller manager, scheduler), MiB, measured here with 3 nodes. */
const CONTROL_PLANE_MIB = 1536;
/** Memory one node takes with eni-ipam and a few dozen pods (containerd, kubelet, kube-proxy, ipamd, pods), MiB. */
const NODE_MIB = 768;
/** The most nodes a cluster has whatever the memory: every node is processes on this one machine's CPUs. */
const NODE_CAP = 10;

/** How many nodes this machine can hold now: (MemAvailable − the control plane) / one node's share, at most {@link NODE_CAP}. */
export function maxNodes(meminfo = readMeminfo()): number {
  const m = /^MemAvailable:\s+(\d+) kB/m.exec(meminfo);
  const availMib = m ? Number(m[1]) / 1024 : 0;
  return Math.max(0, Math.min(NODE_CAP, Math.floor((availMib - CONTROL_PLANE_MIB) / NODE_MIB)));
}

function readMeminfo(): string {
  try {
    return readFileSync('/proc/meminfo', 'utf8');
  } catch {
    return '';
  }
}

/**
 * Parses `args` (what follows `up`). @returns the cluster's options, or `{ error }`: one line
 * naming the option, the value and what is accepted.
 */
export function parseUpOptions(args: string[], limit = maxNodes()): ClusterOptions | { error: string } {
  let v: { nodes?: string; 'instance-types'?: string; 'ip-family'?: string };
  try {
    v = parseArgs({
      args,
      options: { nodes: { type: 'string' }, 'instance-types': { type: 'string' }, 'ip-family': { type: 'string' } },
      strict: true,
    }).values;
  } catch (e) {
    return {
      error: `${(e as Error).message} (accepted: --nodes N, --instance-types t1,t2,…, --ip-family ipv4|ipv6|dual)`,
    };
  }
  const o: ClusterOptions = {};
  if (v.nodes !== undefined) {
    const n = Number(v.nodes);
    if (!/^\d+$/.test(v.nodes.trim()) || n < 1 || n > limit)
      return {
        error: `--nodes ${JSON.stringify(v.nodes)}: a whole number from 1 to ${limit} is accepted (${limit}: what this machine's free memory holds, ${CONTROL_PLANE_MIB} MiB for the control plane and ${NODE_MIB} MiB a node, at most ${NODE_CAP})`,
      };
    o.nodes = n;
  }
  if (v['instance-types'] !== undefined) {
    const types = v['instance-types'].split(',').map((t) => t.trim());
    const bad = types.find((t) => !instanceTypeInfo(t));
    if (bad !== undefined)
      return {
        error: `--instance-types: ${JSON.stringify(bad)} is not an EC2 instance type the simulated cloud knows`,
      };
    o.instanceTypes = types;
  }
  if (v['ip-family'] !== undefined) {
    if (!['ipv4', 'ipv6', 'dual'].includes(v['ip-family']))
      return { error: `--ip-family ${JSON.stringify(v['ip-family'])}: ipv4, ipv6 or dual is accepted` };
    o.ipFamily = v['ip-family'] as ClusterOptions['ipFamily'] & string;
  }
  return o;
}
