/**
 * The node's sources other than ipamd, each read once, read-only, with a deadline, each
 * failure turned into a `{ error }` (never a throw): the checkpoint file, the kernel, IMDS
 * and EC2. The audit reads them beside ipamd; status and pods read them instead of ipamd
 * when it is down (./offline.ts), which is when comparing them matters most.
 *
 * The checkpoint is parsed here, NOT with ipamd's loader, which moves a corrupt file aside:
 * the CLI changes nothing.
 */
import { readCheckpoint as readCheckpointFiles, type CheckpointData } from '../ipamd/checkpoint/index.js';
import { Ec2Api, type Ec2Eni } from '../ipamd/cloud/ec2.js';
import { ImdsClient, type ImdsInstance } from '../ipamd/cloud/imds.js';
import type { KernelEvidence } from '../ipamd/restore/kernel-parse.js';
import { KernelSource } from '../ipamd/restore/kernel-source.js';
import { systemError } from './errors.js';
import type { GlobalOptions } from './options.js';

/** A source's read: its data, or why it could not be read, or why it was not asked. */
export type SourceRead<T> =
  | { ok: true; data: T; from: string }
  | { ok: false; error: string; from: string }
  | { ok: false; skipped: string; from: string };

/** The message of any thrown value. */
export const message = (e: unknown): string => (e as Error)?.message ?? String(e);

/** Reads the checkpoint (snapshot + journal, merged as ipamd does) without changing it. */
export async function readCheckpoint(path: string): Promise<SourceRead<CheckpointData>> {
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

/** IMDS as ipamd reaches it (AWS_EC2_METADATA_SERVICE_ENDPOINT, else the link-local address). */
export function imdsEndpoint(): string {
  return process.env.AWS_EC2_METADATA_SERVICE_ENDPOINT || 'http://169.254.169.254';
}

/** This instance's identity from IMDS (at most 2 s per request). */
export async function readInstance(o: GlobalOptions): Promise<SourceRead<ImdsInstance>> {
  const from = `IMDS ${imdsEndpoint()}`;
  const imds = new ImdsClient({ endpoint: imdsEndpoint(), timeoutMs: Math.min(o.timeoutMs, 2000) });
  try {
    return { ok: true, data: await imds.instance(), from };
  } catch (e) {
    return { ok: false, error: `IMDS did not answer: ${message(e)}`, from };
  } finally {
    imds.close();
  }
}

/** Which ENIs to describe: those attached to `instanceId`, else these ids. */
export interface Ec2Query {
  instanceId?: string;
  region?: string;
  eniIds: string[];
  skip?: string;
}

/**
 * DescribeNetworkInterfaces (one call, two attempts at most) with the AWS SDK, at
 * AWS_EC2_ENDPOINT as ipamd. The region: `q.region`, AWS_REGION/AWS_DEFAULT_REGION, else IMDS.
 */
export async function readEc2(o: GlobalOptions, q: Ec2Query): Promise<SourceRead<Ec2Eni[]>> {
  const endpoint = process.env.AWS_EC2_ENDPOINT || undefined;
  const from = `EC2${endpoint ? ` ${endpoint}` : ''}`;
  if (q.skip) return { ok: false, skipped: q.skip, from };
  if (!q.instanceId && q.eniIds.length === 0) return { ok: true, data: [], from };
  let ec2: Ec2Api | undefined;
  try {
    let region = q.region || process.env.AWS_REGION || process.env.AWS_DEFAULT_REGION;
    if (!region) {
      const i = await readInstance(o);
      if (!i.ok) throw new Error(`no region (--region or AWS_REGION) and ${'error' in i ? i.error : ''}`);
      region = i.data.region;
    }
    ec2 = new Ec2Api({ region, ...(endpoint ? { endpoint } : {}), maxAttempts: 2, timeoutMs: o.timeoutMs });
    const data = q.instanceId
      ? await ec2.describeEnisByFilters({ 'attachment.instance-id': [q.instanceId] })
      : await ec2.describeEnis(q.eniIds);
    return { ok: true, data, from };
  } catch (e) {
    return { ok: false, error: `DescribeNetworkInterfaces failed: ${message(e)}`, from };
  } finally {
    ec2?.close();
  }
}

/** The kernel's pod wiring (routes to pod veths, rules) in `o.netns` or this namespace. */
export async function readKernel(o: GlobalOptions): Promise<SourceRead<KernelEvidence>> {
  const src = new KernelSource({ ...(o.netns ? { netnsPath: o.netns } : {}), timeoutMs: o.timeoutMs });
  const where = o.netns ? `the kernel (netns ${o.netns})` : 'the kernel (this network namespace)';
  try {
    return { ok: true, data: await src.readKernel(), from: where };
  } catch (e) {
    return { ok: false, error: message(e).replace(src.description, where), from: where };
  }
}

/** `<from> (<note>)` for a read, or `<from>: <why not>`. */
export function describeRead<T>(r: SourceRead<T>, note: (d: T) => string): string {
  if (r.ok) return `${r.from} (${note(r.data)})`;
  return 'error' in r ? `${r.from}: unreadable: ${r.error}` : `${r.from}: skipped: ${r.skipped}`;
}
