/**
 * The network limits of this instance's type, read with one DescribeInstanceTypes per
 * start at most, and kept in a small file next to the checkpoint so that a restart (a
 * crash loop, a daemonset roll-out, a whole fleet restarting together under EC2
 * throttling) needs none. The limits of an instance type are fixed facts of EC2
 * (`NetworkInfo.MaximumNetworkInterfaces`, `Ipv4AddressesPerInterface`, `Hypervisor`,
 * `BareMetal`), and the file is keyed by the type, so a stopped-and-resized instance
 * reads the new type's limits. The default checkpoint directory is on tmpfs
 * (`/var/run/eni-ipam`): a reboot starts with one fresh call.
 *
 * A cache file that cannot be read or parsed, or that names another type, is ignored
 * (and rewritten); one that cannot be written only costs the next start one call.
 */
import { readFile } from 'node:fs/promises';
import writeFileAtomic from 'write-file-atomic';
import { z } from 'zod';
import type { Logger } from '../log.js';
import type { Ec2Api, Ec2CallOptions, InstanceTypeLimits } from './ec2.js';

const CacheSchema = z.object({
  version: z.literal(1),
  instanceType: z.string().min(1),
  maxEnis: z.number().int().positive(),
  ipv4PerEni: z.number().int().positive(),
  hypervisor: z.string(),
  bareMetal: z.boolean(),
  fetchedAt: z.string(),
});

/** Where the limits came from. */
export type LimitsSource = 'cache' | 'ec2';

/**
 * Reads cached limits of `instanceType` from `file`.
 * @returns the limits, or undefined when the file is missing, unreadable, malformed or names another type. Never throws.
 */
export async function readCachedLimits(file: string, instanceType: string): Promise<InstanceTypeLimits | undefined> {
  try {
    const parsed = CacheSchema.safeParse(JSON.parse(await readFile(file, 'utf8')));
    if (!parsed.success || parsed.data.instanceType !== instanceType) return undefined;
    const { maxEnis, ipv4PerEni, hypervisor, bareMetal } = parsed.data;
    return { instanceType, maxEnis, ipv4PerEni, hypervisor, bareMetal };
  } catch {
    return undefined;
  }
}

/** Writes the limits to `file` atomically (temp file + rename). @throws Error from the file system. */
export async function writeCachedLimits(
  file: string,
  limits: InstanceTypeLimits,
  now: Date = new Date(),
): Promise<void> {
  const body: z.infer<typeof CacheSchema> = { version: 1, ...limits, fetchedAt: now.toISOString() };
  await writeFileAtomic(file, `${JSON.stringify(body)}\n`, { mode: 0o600 });
}

/**
 * The limits of `instanceType`: from `cacheFile` when it holds them, else from one
 * DescribeInstanceTypes call (with `callOptions`: its attempt budget and retry hook),
 * then cached. Without `cacheFile`, always the call.
 * @throws Ec2Error when the call fails after its attempts.
 */
export async function loadInstanceTypeLimits(p: {
  ec2: Ec2Api;
  instanceType: string;
  cacheFile?: string;
  log: Logger;
  callOptions?: Ec2CallOptions;
}): Promise<{ limits: InstanceTypeLimits; source: LimitsSource }> {
  const cached = p.cacheFile ? await readCachedLimits(p.cacheFile, p.instanceType) : undefined;
  if (cached) return { limits: cached, source: 'cache' };
  const limits = await p.ec2.instanceTypeLimits(p.instanceType, p.callOptions);
  if (p.cacheFile) {
    await writeCachedLimits(p.cacheFile, limits).catch((e: Error) =>
      p.log.warn(
        { file: p.cacheFile, err: e.message },
        'could not cache the instance type limits; the next start asks EC2 again',
      ),
    );
  }
  return { limits, source: 'ec2' };
}
