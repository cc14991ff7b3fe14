/**
 * The audit's I/O edge: reads every source once, read-only, each with a deadline, and
 * turns each failure into a `{ error }` (never a throw), so one unreadable source makes
 * the audit incomplete, not impossible. Only ipamd itself is required (its answer is
 * what everything else is compared with).
 *
 * Sources: the checkpoint file (parsed here, NOT with ipamd's loader, which moves a
 * corrupt file aside: the CLI changes nothing), ipamd's datastore (introspection), the
 * kernel (`ip -json` routes, veths, rules in the node netns; ipamd/restore/kernel-source),
 * EC2 (DescribeNetworkInterfaces of ipamd's ENIs with the AWS SDK, AWS_EC2_ENDPOINT as
 * ipamd), the CRI runtime (ListPodSandbox + PodSandboxStatus; ipamd/restore/cri-source)
 * and, when a node name is known, the Kubernetes pods on this node.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { readCheckpoint as readCheckpointFiles, type CheckpointData } from '../../ipamd/checkpoint/index.js';
import { Ec2Api, type Ec2Eni } from '../../ipamd/cloud/ec2.js';
import { ImdsClient } from '../../ipamd/cloud/imds.js';
import { CriSource, detectCriEndpoint, type CriSandbox } from '../../ipamd/restore/cri-source.js';
import type { KernelEvidence } from '../../ipamd/restore/kernel-parse.js';
import { KernelSource } from '../../ipamd/restore/kernel-source.js';
import { loadKubeConfig } from '../../ipamd/restore/kube-source-config.js';
import { listNodePods } from '../../ipamd/restore/kube-source-list.js';
import type { KubePod } from '../../ipamd/restore/kube-source-pod.js';
import { systemError } from '../errors.js';
import { fetchAllocations, fetchStatus, type Allocation, type IpamdStatus } from '../ipamd-api.js';
import type { GlobalOptions } from '../options.js';

/** A source's read: its data, or why it could not be read, or why it was not asked. */
export type SourceRead<T> =
  | { ok: true; data: T; from: string }
  | { ok: false; error: string; from: string }
  | { ok: false; skipped: string; from: string };

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
  status: IpamdStatus;
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

const message = (e: unknown): string => (e as Error)?.message ?? String(e);

/** Reads the checkpoint (snapshot + journal, merged as ipamd does) without changing it. */
async function readCheckpoint(path: string): Promise<SourceRead<CheckpointData>> {
  try {
    const r = await readCheckpointFiles(path);
    if (r.kind === 'missing')
      throw Object.assign(new Error(`ENOENT: no such file or directory, open '${path}'`), { code: 'ENOENT', path });
    if (r.kind === 'corrupt') return { ok: false, error: `checkpoint ${path} is unusable: ${r.reason}`, from: path };
    return { ok: true, data: r.data, from: path };
  } catch (e) {
    return { ok: false, error: systemError(e, `checkpoint ${path}`).message, from: path };
  }
}

/** The region: the flag, AWS_REGION/AWS_DEFAULT_REGION, else IMDS (AWS_EC2_METADATA_SERVICE_ENDPOINT as ipamd). */
async function region(o: GlobalOptions, flag?: string): Promise<string> {
  const r = flag || process.env.AWS_REGION || process.env.AWS_DEFAULT_REGION;
  if (r) return r;
  const imds = new ImdsClient({
    endpoint: process.env.AWS_EC2_METADATA_SERVICE_ENDPOINT || 'http://169.254.169.254',
    timeoutMs: Math.min(o.timeoutMs, 2000),
  });
  return (await imds.instance()).region;
}

/** DescribeNetworkInterfaces of the ENIs ipamd serves from (one call, two attempts at most). */
async function readEc2(o: GlobalOptions, eniIds: string[], a: AuditSourceOptions): Promise<SourceRead<Ec2Eni[]>> {
  const endpoint = process.env.AWS_EC2_ENDPOINT || undefined;
  const from = `EC2${endpoint ? ` ${endpoint}` : ''}`;
  if (a.noEc2) return { ok: false, skipped: '--no-ec2', from };
  if (eniIds.length === 0) return { ok: true, data: [], from };
  let ec2: Ec2Api | undefined;
  try {
    ec2 = new Ec2Api({
      region: await region(o, a.region),
      ...(endpoint ? { endpoint } : {}),
      maxAttempts: 2,
      timeoutMs: o.timeoutMs,
    });
    return { ok: true, data: await ec2.describeEnis(eniIds), from };
  } catch (e) {
    return { ok: false, error: `DescribeNetworkInterfaces failed: ${message(e)}`, from };
  } finally {
    ec2?.close();
  }
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

/**
 * Reads all sources (concurrently after ipamd).
 * @throws CliError when ipamd itself cannot be read (unreachable 3 / permission 4).
 */
export async function collectAudit(o: GlobalOptions, a: AuditSourceOptions = {}): Promise<AuditInputs> {
  const [status, allocations] = await Promise.all([fetchStatus(o), fetchAllocations(o)]);
  const kernelSrc = new KernelSource({ ...(o.netns ? { netnsPath: o.netns } : {}), timeoutMs: o.timeoutMs });
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
  const where = o.netns ? `the kernel (netns ${o.netns})` : 'the kernel (this network namespace)';
  const kernel = kernelSrc.readKernel().then(
    (data): SourceRead<KernelEvidence> => ({ ok: true, data, from: where }),
    (e): SourceRead<KernelEvidence> => ({
      ok: false,
      error: message(e).replace(kernelSrc.description, where),
      from: where,
    }),
  );
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
  const [checkpoint, k, ec2, c, kube, r, v] = await Promise.all([
    readCheckpoint(o.checkpoint),
    kernel,
    readEc2(
      o,
      status.enis.map((e) => e.eniId),
      a,
    ),
    cri,
    readKube(o, a),
    ipJson<IpRule>(['rule', 'show']),
    veths,
  ]);
  return { status, allocations, checkpoint, kernel: k, rules: r, podVeths: v, ec2, cri: c, kube };
}
