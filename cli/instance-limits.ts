/**
 * The EC2 instance table `eni-ipam max-pods` reads: every instance type's ENI limit (its
 * default network card), IPv4 addresses per ENI, hypervisor, bare-metal flag and vCPUs.
 * Public facts (EC2 DescribeInstanceTypes), generated into ./data/instance-limits.json by
 * `scripts/refresh-instance-limits.mjs`, which records each source (repository, path,
 * commit, date) in the file. Loaded on first use only: other commands never parse it.
 */

/** One instance type's row. */
export interface InstanceLimits {
  instanceType: string;
  /** Max ENIs on the default network card (the only card pods are served from). */
  maxEnis: number;
  /** Max private IPv4 addresses per ENI, the primary included; a /28 prefix takes one. */
  ipv4PerEni: number;
  /** `nitro`, `xen`, or `unknown` (EC2 reports none, e.g. bare metal). */
  hypervisor: string;
  bareMetal: boolean;
  /** Default vCPUs; null where no source lists the type. */
  vcpus: number | null;
}

/** The loaded table and where it came from. */
export interface InstanceTable {
  types: ReadonlyMap<string, InstanceLimits>;
  /** `generatedAt` of the data file (YYYY-MM-DD). */
  generatedAt: string;
  /** One line naming the sources, for messages. */
  source: string;
}

/** How to refresh the table (quoted in the unknown-type message). */
export const REFRESH_HINT =
  'refresh the table with scripts/refresh-instance-limits.mjs (see its header), rebuild, or pass --instance-type with a listed type';

type Row = [string, number, number, string, 0 | 1, number | null];
interface DataFile {
  generatedAt: string;
  sources: { limits: { repo: string; commit?: string }; vcpus: { pages: Array<{ repo: string }> } };
  types: Row[];
}

let cached: Promise<InstanceTable> | undefined;

/** Loads ./data/instance-limits.json once (a dynamic import, so only max-pods pays for it). */
export function instanceTable(): Promise<InstanceTable> {
  cached ??= import('./data/instance-limits.json', { with: { type: 'json' } }).then((m) => {
    const d = m.default as unknown as DataFile;
    const types = new Map<string, InstanceLimits>();
    for (const [instanceType, maxEnis, ipv4PerEni, hypervisor, metal, vcpus] of d.types)
      types.set(instanceType, { instanceType, maxEnis, ipv4PerEni, hypervisor, bareMetal: metal === 1, vcpus });
    const l = d.sources.limits;
    return {
      types,
      generatedAt: d.generatedAt,
      source: `${l.repo}${l.commit ? `@${l.commit.slice(0, 12)}` : ''} (limits), ${[...new Set(d.sources.vcpus.pages.map((p) => p.repo))].join(', ')} (vCPUs), generated ${d.generatedAt}`,
    };
  });
  return cached;
}
