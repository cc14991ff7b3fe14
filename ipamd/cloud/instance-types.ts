/**
 * Network limits of EC2 instance types, as DescribeInstanceTypes reports them
 * (`NetworkInfo.MaximumNetworkInterfaces`, `Ipv4AddressesPerInterface`,
 * `Ipv6AddressesPerInterface`, `Hypervisor`). Figures from the AWS EC2 User Guide,
 * "Maximum IP addresses per network interface".
 */

/** Limits of one instance type. */
export interface InstanceTypeInfo {
  instanceType: string;
  /** Max ENIs (all on network card 0 for these types). */
  maxEnis: number;
  /** Max private IPv4s per ENI, the primary included; a /28 prefix takes one slot. */
  ipv4PerEni: number;
  ipv6PerEni: number;
  hypervisor: 'nitro' | 'xen';
  vcpus: number;
  memoryMiB: number;
}

const T = (
  instanceType: string,
  maxEnis: number,
  ipv4PerEni: number,
  hypervisor: 'nitro' | 'xen',
  vcpus: number,
  memoryMiB: number,
  ipv6PerEni = ipv4PerEni,
): InstanceTypeInfo => ({ instanceType, maxEnis, ipv4PerEni, ipv6PerEni, hypervisor, vcpus, memoryMiB });

/** The instance types eni-ipam knows (the simulated cloud's, and max-pods'), by name. */
export const INSTANCE_TYPES: ReadonlyMap<string, InstanceTypeInfo> = new Map(
  [
    T('t2.micro', 2, 2, 'xen', 1, 1024),
    T('t2.medium', 3, 6, 'xen', 2, 4096),
    T('t2.large', 3, 12, 'xen', 2, 8192),
    T('m4.large', 2, 10, 'xen', 2, 8192),
    T('t3.micro', 2, 2, 'nitro', 2, 1024),
    T('t3.small', 3, 4, 'nitro', 2, 2048),
    T('t3.medium', 3, 6, 'nitro', 2, 4096),
    T('t3.large', 3, 12, 'nitro', 2, 8192),
    T('m5.large', 3, 10, 'nitro', 2, 8192),
    T('m5.xlarge', 4, 15, 'nitro', 4, 16384),
    T('m5.2xlarge', 4, 15, 'nitro', 8, 32768),
    T('m5.4xlarge', 8, 30, 'nitro', 16, 65536),
    T('c5.large', 3, 10, 'nitro', 2, 4096),
    T('c5.xlarge', 4, 15, 'nitro', 4, 8192),
    T('c5.4xlarge', 8, 30, 'nitro', 16, 32768),
    T('r5.large', 3, 10, 'nitro', 2, 16384),
    T('t3.nano', 2, 2, 'nitro', 2, 512),
    T('t3.xlarge', 4, 15, 'nitro', 4, 16384),
    T('t3.2xlarge', 4, 15, 'nitro', 8, 32768),
    T('m5.8xlarge', 8, 30, 'nitro', 32, 131072),
    T('c5.2xlarge', 4, 15, 'nitro', 8, 16384),
    T('c5.9xlarge', 8, 30, 'nitro', 36, 73728),
    T('r5.xlarge', 4, 15, 'nitro', 4, 32768),
    T('r5.2xlarge', 4, 15, 'nitro', 8, 65536),
    T('m6i.large', 3, 10, 'nitro', 2, 8192),
  ].map((t) => [t.instanceType, t]),
);

/** Per-ENI IPv4 cap for an ENI not attached to any instance (the largest per-ENI figure in EC2). */
export const UNATTACHED_ENI_IPV4_LIMIT = 50;

/** Looks up a type; undefined when unknown. */
export function instanceTypeInfo(instanceType: string): InstanceTypeInfo | undefined {
  return INSTANCE_TYPES.get(instanceType);
}
