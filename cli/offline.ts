/**
 * The node without ipamd: what `status` and `pods` answer from when ipamd's introspection
 * is unreachable (a crash-looping ipamd is when this matters most). The checkpoint says
 * which pod holds which address on which ENI; the kernel which addresses are wired to a
 * pod veth; IMDS and EC2 which ENIs are attached, at which device number, with which
 * addresses. Every answer names the sources it was read from (./sources.ts).
 */
import type { CheckpointData } from '../ipamd/checkpoint/index.js';
import type { Ec2Eni } from '../ipamd/cloud/ec2.js';
import type { ImdsInstance } from '../ipamd/cloud/imds.js';
import type { KernelEvidence } from '../ipamd/restore/kernel-parse.js';
import { CliError, EXIT } from './errors.js';
import type { Allocation, IpamdStatus } from './ipamd-api.js';
import type { GlobalOptions } from './options.js';
import { describeRead, readCheckpoint, readEc2, readInstance, readKernel, type SourceRead } from './sources.js';
import { routeTable } from './views.js';

/** Every source read in ipamd's stead. */
export interface OfflineNode {
  /** Why ipamd was not read. */
  ipamdError: string;
  instance: SourceRead<ImdsInstance>;
  checkpoint: SourceRead<CheckpointData>;
  kernel: SourceRead<KernelEvidence>;
  ec2: SourceRead<Ec2Eni[]>;
}

/**
 * A stand-in for `/v1/status` built from the checkpoint alone: its ENIs are those its
 * allocations name (device number -1: unknown), counts are its allocations. Pure.
 */
export function statusFromCheckpoint(cp: CheckpointData): IpamdStatus {
  const byEni = new Map<string, number>();
  for (const a of cp.allocations) byEni.set(a.eniId, (byEni.get(a.eniId) ?? 0) + 1);
  const enis = [...byEni].map(([eniId, assigned]) => ({
    eniId,
    deviceNumber: -1,
    isPrimary: false,
    createdAtMs: 0,
    capacity: 0,
    total: assigned,
    assigned,
    cooling: 0,
  }));
  const n = cp.allocations.length;
  return {
    instanceId: '',
    instanceType: '',
    counts: { total: n, assigned: n, available: 0, cooling: cp.cooldown.length },
    enis,
  } as unknown as IpamdStatus;
}

/** Reads the checkpoint, the kernel, IMDS and EC2 (the ENIs attached to this instance, else those the checkpoint names). */
export async function readOffline(o: GlobalOptions, ipamdError: string, region?: string): Promise<OfflineNode> {
  const [instance, checkpoint, kernel] = await Promise.all([
    readInstance(o),
    readCheckpoint(o.checkpoint),
    readKernel(o),
  ]);
  const eniIds = checkpoint.ok ? [...new Set(checkpoint.data.allocations.map((a) => a.eniId))] : [];
  const ec2 = await readEc2(o, {
    eniIds,
    ...(instance.ok ? { instanceId: instance.data.instanceId, region: instance.data.region } : {}),
    ...(region ? { region } : {}),
    ...(!instance.ok && eniIds.length === 0
      ? { skip: 'no instance id (IMDS) and no ENI named by the checkpoint' }
      : {}),
  });
  return { ipamdError, instance, checkpoint, kernel, ec2 };
}

/** `sources read: …; not read: …` naming each source and what it gave. */
export function sourcesLine(n: OfflineNode): string {
  const reads = [
    describeRead(n.checkpoint, (d) => `${d.allocations.length} allocations`),
    describeRead(n.kernel, (d) => `${d.pods.size} pod routes`),
    describeRead(n.instance, (d) => `${d.instanceId} ${d.instanceType}`),
    describeRead(n.ec2, (d) => `${d.length} ENIs`),
  ];
  const ok = [n.checkpoint, n.kernel, n.instance, n.ec2].map((r) => r.ok);
  const read = reads.filter((_, i) => ok[i]);
  const not = [`ipamd (${n.ipamdError})`, ...reads.filter((_, i) => !ok[i])];
  return `sources read: ${read.join('; ') || 'none'}\nnot read: ${not.join('; ')}`;
}

/** The allocations the checkpoint holds ([] when unreadable). */
export function offlineAllocations(n: OfflineNode): Allocation[] {
  return n.checkpoint.ok ? n.checkpoint.data.allocations : [];
}

/** Device numbers by ENI id, from EC2's attachments. */
export function offlineDevices(n: OfflineNode): Map<string, number> {
  const m = new Map<string, number>();
  if (n.ec2.ok) for (const e of n.ec2.data) if (e.attachment) m.set(e.eniId, e.attachment.deviceIndex);
  return m;
}

/** One ENI as the sources see it without ipamd. */
export interface OfflineEniRow {
  eniId: string;
  deviceNumber: number | null;
  routeTable: string;
  /** Per EC2: secondary IPv4s and /28 prefixes on the ENI (null: EC2 not read or ENI not described). */
  secondaryIps: number | null;
  prefixes: number | null;
  /** Per the checkpoint. */
  assigned: number;
  /** Of those, wired to a pod veth per the kernel (null: kernel not read). */
  wired: number | null;
}

/** ENIs from EC2 (attached ones) and the checkpoint (those its allocations name), by device number. Pure. */
export function offlineEniRows(n: OfflineNode): OfflineEniRow[] {
  const allocs = offlineAllocations(n);
  const described = new Map(n.ec2.ok ? n.ec2.data.map((e) => [e.eniId, e]) : []);
  const ids = new Set([...described.keys(), ...allocs.map((a) => a.eniId)]);
  const kernel = n.kernel.ok ? n.kernel.data : undefined;
  return [...ids]
    .map((eniId) => {
      const e = described.get(eniId);
      const mine = allocs.filter((a) => a.eniId === eniId);
      const dev = e?.attachment?.deviceIndex ?? null;
      return {
        eniId,
        deviceNumber: dev,
        routeTable: routeTable(dev ?? undefined),
        secondaryIps: e ? e.secondaryIps.length : null,
        prefixes: e ? e.ipv4Prefixes.length : null,
        assigned: mine.length,
        wired: kernel ? mine.filter((a) => kernel.pods.has(a.ipv4)).length : null,
      };
    })
    .sort((a, b) => (a.deviceNumber ?? 999) - (b.deviceNumber ?? 999) || a.eniId.localeCompare(b.eniId));
}

/**
 * Runs `read` against ipamd; returns the CliError instead of throwing when ipamd is
 * unreachable (exit 3), so the caller can answer from the other sources. Other errors
 * (permission, usage) are thrown.
 */
export async function unlessUnreachable<T>(read: () => Promise<T>): Promise<T | CliError> {
  try {
    return await read();
  } catch (e) {
    if (e instanceof CliError && e.code === EXIT.unreachable) return e;
    throw e;
  }
}

/** Why ipamd was not read, shortened from its error (e.g. `connection refused at http://127.0.0.1:61679`). */
export function ipamdReason(e: CliError): string {
  const m = /^cannot reach ipamd introspection at (\S+) \(([^)]*)\)/.exec(e.message);
  return m ? `${m[2]} at ${m[1]}` : e.message;
}

/** The error that ends an answer given without ipamd: exit 3, naming what was read instead. */
export function answeredWithoutIpamd(n: OfflineNode): CliError {
  const read = [
    n.checkpoint.ok && 'the checkpoint',
    n.kernel.ok && 'the kernel',
    n.instance.ok && 'IMDS',
    n.ec2.ok && 'EC2',
  ].filter(Boolean);
  return new CliError(
    `cannot reach ipamd introspection (${n.ipamdError}): answered from ${read.length ? read.join(', ') : 'no source (none could be read)'} instead (see "sources read" above; set --introspection or INTROSPECTION_BIND_ADDRESS if ipamd runs elsewhere)`,
    EXIT.unreachable,
  );
}
