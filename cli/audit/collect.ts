/**
 * The audit's I/O edge: reads every source once, read-only, each with a deadline, and
 * turns each failure into a `{ error }` (never a throw), so one unreadable source makes
 * the audit incomplete, not impossible. ipamd's answer is what everything else is compared
 * with; when ipamd is down (crash-looping: when the comparison matters most) the
 * checkpoint stands in for it, and the audit says so.
 *
 * Sources (../sources.ts): the checkpoint file, ipamd's datastore (introspection), the
 * kernel (`ip -json` routes, veths, rules in the node netns; ipamd/restore/kernel-source),
 * EC2 (DescribeNetworkInterfaces of the reference's ENIs with the AWS SDK, AWS_EC2_ENDPOINT as
 * ipamd), the CRI runtime (ListPodSandbox + PodSandboxStatus; ipamd/restore/cri-source)
 * and, when a node name is known, the Kubernetes pods on this node.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { CheckpointData } from '../../ipamd/checkpoint/index.js';
import type { Ec2Eni } from '../../ipamd/cloud/ec2.js';
import { CriSource, detectCriEndpoint, type CriSandbox } from '../../ipamd/restore/cri-source.js';
import type { KernelEvidence } from '../../ipamd/restore/kernel-parse.js';
import { loadKubeConfig } from '../../ipamd/kube/config.js';
import { listNodePods } from '../../ipamd/kube/pod-list.js';
import type { KubePod } from '../../ipamd/kube/pod-evidence.js';
import { CliError, EXIT } from '../errors.js';
import { fetchAllocations, fetchStatus, type Allocation, type IpamdStatus } from '../ipamd-api.js';
import { statusFromCheckpoint } from '../offline.js';
import type { GlobalOptions } from '../options.js';
import { message, readCheckpoint, readEc2, readKernel, type SourceRead } from '../sources.js';

export type { SourceRead } from '../sources.js';

/** One ip rule as `ip -json rule show` prints it. */
export interface IpRule {
  priority: number;
  src?: string;
  dst?: string;
  table?: string;
  [k: string]: unknown;
}

/** Everything the audit compares. */
export interface AuditInputs {
  /** ipamd's introspection: read, or why not (then the checkpoint is the reference). */
  ipamd: SourceRead<true>;
  /** What the other sources are compared with: `ipamd`, or `the checkpoint` when ipamd is down. */
  reference: string;
  /** ipamd's status; when it is down, the ENIs the checkpoint's allocations name. */
  status: IpamdStatus;
  /** ipamd's allocations; when it is down, the checkpoint's. */
  allocations: Allocation[];
  checkpoint: SourceRead<CheckpointData>;
  kernel: SourceRead<KernelEvidence>;
  /** `ip -json rule show` of the same netns (for exact clean-up commands); empty when unreadable. */
  rules: IpRule[];
  /** Host-side pod veths (peer in another netns) of the same netns, by name; empty when unreadable. */
  podVeths: string[];
  ec2: SourceRead<Ec2Eni[]>;
  cri: SourceRead<CriSandbox[]>;
  kube: SourceRead<KubePod[]>;
}

/** Extra options of the audit's sources. */
export interface AuditSourceOptions {
  region?: string;
  nodeName?: string;
  kubeconfig?: string;
  /** Skip EC2 (e.g. no credentials on this host). */
  noEc2?: boolean;
}

/** Lists the Kubernetes pods bound to this node, when its name is known. */
async function readKube(o: GlobalOptions, a: AuditSourceOptions): Promise<SourceRead<KubePod[]>> {
  const nodeName = a.nodeName || process.env.MY_NODE_NAME;
  if (!nodeName) return { ok: false, skipped: 'no node name (--node-name or MY_NODE_NAME)', from: 'Kubernetes API' };
  try {
    const { kc } = loadKubeConfig(a.kubeconfig);
    const r = await listNodePods(kc, nodeName, o.timeoutMs);
    return {
      ok: true,
      data: [...r.pods.values()],
      from: `Kubernetes API ${kc.getCurrentCluster()?.server ?? ''}`.trim(),
    };
  } catch (e) {
    return { ok: false, error: `listing pods on node ${nodeName} failed: ${message(e)}`, from: 'Kubernetes API' };
  }
}

/** ipamd's status and allocations, or why they could not be read (the error's message). */
async function readIpamd(
  o: GlobalOptions,
): Promise<{ status: IpamdStatus; allocations: Allocation[] } | { error: string }> {
  try {
    const [status, allocations] = await Promise.all([fetchStatus(o), fetchAllocations(o)]);
    return { status, allocations };
  } catch (e) {
    if (e instanceof CliError && e.code !== EXIT.unreachable) throw e; // permission: the operator must fix it
    return { error: message(e) };
  }
}

/**
 * Reads all sources (concurrently after ipamd). When ipamd is unreachable, the checkpoint
 * becomes the reference the others are compared with (its allocations, the ENIs they name).
 * @throws CliError when ipamd refuses the CLI (permission 4), or is down and the
 *         checkpoint cannot be read either (unreachable 3): nothing to compare with.
 */
export async function collectAudit(o: GlobalOptions, a: AuditSourceOptions = {}): Promise<AuditInputs> {
  const ipamdFrom = `ipamd introspection ${o.introspection}`;
  const [live, cp] = await Promise.all([readIpamd(o), readCheckpoint(o.checkpoint)]);
  let ipamd: SourceRead<true>;
  let status: IpamdStatus;
  let allocations: Allocation[];
  if ('error' in live) {
    if (!cp.ok)
      throw new CliError(
        `${live.error}; and the checkpoint cannot stand in for it: ${'error' in cp ? cp.error : cp.skipped}`,
        EXIT.unreachable,
      );
    ipamd = { ok: false, error: live.error.replace(/^cannot reach ipamd introspection at \S+ /, ''), from: ipamdFrom };
    allocations = cp.data.allocations;
    status = statusFromCheckpoint(cp.data);
  } else {
    ipamd = { ok: true, data: true, from: ipamdFrom };
    ({ status, allocations } = live);
  }
  let criEndpoint = '';
  const cri = (async (): Promise<SourceRead<CriSandbox[]>> => {
    try {
      criEndpoint = detectCriEndpoint(o.criEndpoint).endpoint;
      const src = new CriSource({ endpoint: criEndpoint, timeoutMs: Math.min(o.timeoutMs, 5000) });
      try {
        return { ok: true, data: await src.listReadySandboxes(), from: `CRI ${criEndpoint}` };
      } finally {
        src.close();
      }
    } catch (e) {
      return { ok: false, error: message(e), from: `CRI ${criEndpoint || o.criEndpoint || '(auto-detect)'}` };
    }
  })();
  const ipJson = <T>(args: string[]): Promise<T[]> => {
    const argv = [...(o.netns ? ['nsenter', `--net=${o.netns}`] : []), 'ip', '-json', ...args];
    return promisify(execFile)(argv[0]!, argv.slice(1), { timeout: o.timeoutMs, maxBuffer: 32 * 1024 * 1024 }).then(
      (r) => JSON.parse(r.stdout || '[]') as T[],
      () => [] as T[],
    );
  };
  const veths = ipJson<{ ifname: string; link_netnsid?: number }>(['link', 'show', 'type', 'veth']).then((ls) =>
    ls.filter((l) => typeof l.link_netnsid === 'number').map((l) => l.ifname),
  );
  const [k, ec2, c, kube, r, v] = await Promise.all([
    readKernel(o),
    readEc2(o, {
      eniIds: status.enis.map((e) => e.eniId),
      ...(a.region ? { region: a.region } : {}),
      ...(a.noEc2 ? { skip: '--no-ec2' } : {}),
    }),
    cri,
    readKube(o, a),
    ipJson<IpRule>(['rule', 'show']),
    veths,
  ]);
  // With ipamd down the checkpoint is the reference: compared with itself it tells nothing.
  const checkpoint: SourceRead<CheckpointData> = ipamd.ok
    ? cp
    : { ok: false, skipped: 'it stands in for ipamd (the reference)', from: cp.from };
  const reference = ipamd.ok ? 'ipamd' : 'the checkpoint';
  return { ipamd, reference, status, allocations, checkpoint, kernel: k, rules: r, podVeths: v, ec2, cri: c, kube };
}
