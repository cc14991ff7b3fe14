/**
 * The node's /80 IPv6 prefix at start in `ipv6`/`dual` mode (docs/design.md#ip-families;
 * as amazon-vpc-cni-k8s: one prefix on the primary ENI, AssignIpv6Addresses with
 * Ipv6PrefixCount=1 when it has none). Found in IMDS (`ipv6-prefix` of the primary MAC) or
 * in DescribeNetworkInterfaces (`ipv6PrefixSet`: IMDS may lag), else assigned once. What
 * cannot work is one line and ipamd serves nothing: an instance type without IPv6
 * prefixes (non-Nitro), a subnet with no IPv6 block, or EC2 refusing the assignment.
 */
import type { Ec2Port } from '../cloud/ec2-port.js';
import type { ImdsClient } from '../cloud/imds.js';
import type { InstanceTypeLimits } from '../cloud/ec2-options.js';
import { parsePrefix80 } from '../datastore/ipv6-allocations.js';
import type { Logger } from '../log.js';

/**
 * Why IPv6 mode cannot work on this instance type, as one line, or undefined when it can:
 * IPv6 prefixes (AssignIpv6Addresses Ipv6PrefixCount) need a Nitro type (AWS EC2 User
 * Guide, "Assign prefixes to network interfaces").
 */
export function ipv6PrefixRefusal(limits: InstanceTypeLimits, mode: string): string | undefined {
  if (limits.hypervisor === 'nitro' || limits.bareMetal) return undefined;
  return (
    `ENABLE_IPv6=true (${mode} mode) is refused: instance type ${limits.instanceType} runs on the ${limits.hypervisor} hypervisor, ` +
    'and IPv6 /80 prefixes need a Nitro instance type; use a Nitro type or ENABLE_IPv6=false'
  );
}

/** What {@link ensureIpv6Prefix} reads and calls. */
export interface Ipv6PrefixDeps {
  imds: Pick<ImdsClient, 'eniIpv6'>;
  ec2: Pick<Ec2Port, 'describeEnis' | 'assignIpv6Prefixes'>;
  primaryMac: string;
  primaryEniId: string;
  subnetId: string;
  log: Logger;
}

/** The first valid /80 of `list`, or undefined. */
function first80(list: readonly string[] | undefined): string | undefined {
  for (const p of list ?? []) {
    try {
      parsePrefix80(p);
      return p;
    } catch {
      // not a /80: ignore
    }
  }
  return undefined;
}

/**
 * The primary ENI's /80, found or assigned (at most one AssignIpv6Addresses call).
 * @throws Error, one line naming the cause: the subnet has no IPv6 CIDR block, EC2
 *   refused the assignment (its code and message), or returned no /80.
 */
export async function ensureIpv6Prefix(d: Ipv6PrefixDeps): Promise<{ prefix: string; assigned: boolean }> {
  const imds = await d.imds.eniIpv6(d.primaryMac);
  const fromImds = first80(imds.ipv6Prefixes);
  if (fromImds) return { prefix: fromImds, assigned: false };
  const [eni] = await d.ec2.describeEnis([d.primaryEniId]);
  const fromEc2 = first80(eni?.ipv6Prefixes);
  if (fromEc2) return { prefix: fromEc2, assigned: false };
  if (imds.subnetIpv6Cidrs.length === 0)
    throw new Error(
      `ENABLE_IPv6=true is refused: subnet ${d.subnetId} of the primary ENI ${d.primaryEniId} has no IPv6 CIDR block (IMDS subnet-ipv6-cidr-blocks is empty); associate a /64 with the subnet or set ENABLE_IPv6=false`,
    );
  let got: string[];
  try {
    got = await d.ec2.assignIpv6Prefixes(d.primaryEniId, 1);
  } catch (e) {
    throw new Error(
      `ENABLE_IPv6=true: EC2 refused a /80 IPv6 prefix for the primary ENI ${d.primaryEniId}: ${(e as Error).message}`,
    );
  }
  const prefix = first80(got);
  if (!prefix)
    throw new Error(
      `ENABLE_IPv6=true: AssignIpv6Addresses on ${d.primaryEniId} returned no /80 prefix (${JSON.stringify(got)})`,
    );
  d.log.info({ eniId: d.primaryEniId, prefix }, 'assigned the node its IPv6 /80 prefix');
  return { prefix, assigned: true };
}
