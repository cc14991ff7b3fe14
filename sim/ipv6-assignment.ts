/**
 * AssignIpv6Addresses / UnassignIpv6Addresses on the model (AWS EC2 API Reference for
 * both actions; AWS EC2 User Guide, "Assign prefixes to network interfaces"): IPv6
 * addresses come from the ENI's subnet's /64, prefixes are /80s of it. The per-ENI IPv6
 * limit is the instance type's `Ipv6AddressesPerInterface`; an address and a /80 prefix
 * each take one slot of it. IPv6 prefixes need a Nitro instance, as IPv4 prefixes do.
 *
 * Error codes: the API reference lists none specific to these actions, so the sim answers
 * as EC2 does for the IPv4 twin and for a subnet attribute needing an IPv6 block:
 * `InvalidParameterValue` for a subnet without an IPv6 block, a Xen instance asked for
 * prefixes, or more addresses/prefixes than the interface may hold.
 */
import { CloudModel } from './cloud-model.js';
import { Ec2ApiError, invalidParameter } from './ec2-errors.js';
import { UNATTACHED_ENI_IPV4_LIMIT } from './instance-types.js';
import { bigIntToIpv6, ipv6ToBigInt } from './ipv6-cidr.js';
import type { Eni } from './types.js';

/** What to assign: a count or list of IPv6 addresses, or a count or list of /80 prefixes. */
export interface AssignIpv6Input {
  addressCount?: number;
  addresses?: string[];
  prefixCount?: number;
  prefixes?: string[];
}

/** IPv6 slots an ENI uses: one per address, one per /80 prefix. */
export function ipv6SlotsUsed(eni: Eni): number {
  return eni.ipv6Addresses.length + eni.ipv6Prefixes.length;
}

/** Max IPv6 slots of an ENI: its instance type's `ipv6PerEni`, or the unattached cap. */
export function ipv6Limit(model: CloudModel, eni: Eni): number {
  return model.attachedType(eni)?.ipv6PerEni ?? UNATTACHED_ENI_IPV4_LIMIT;
}

function checkRequest(p: AssignIpv6Input): { wantAddrs: boolean; n: number } {
  const wantAddrs = p.addressCount !== undefined || (p.addresses?.length ?? 0) > 0;
  const wantPrefixes = p.prefixCount !== undefined || (p.prefixes?.length ?? 0) > 0;
  if (!wantAddrs && !wantPrefixes)
    throw new Ec2ApiError(
      'MissingParameter',
      'Either Ipv6AddressCount, Ipv6Addresses, Ipv6PrefixCount or Ipv6Prefix must be specified.',
    );
  if (wantAddrs && wantPrefixes)
    throw new Ec2ApiError(
      'InvalidParameterCombination',
      'IPv6 addresses and IPv6 prefixes cannot be assigned in the same request.',
    );
  if (p.addressCount !== undefined && p.addresses?.length)
    throw new Ec2ApiError(
      'InvalidParameterCombination',
      'Ipv6AddressCount and Ipv6Addresses cannot both be specified.',
    );
  if (p.prefixCount !== undefined && p.prefixes?.length)
    throw new Ec2ApiError('InvalidParameterCombination', 'Ipv6PrefixCount and Ipv6Prefix cannot both be specified.');
  const n = wantAddrs ? (p.addressCount ?? p.addresses!.length) : (p.prefixCount ?? p.prefixes!.length);
  if (n < 1) throw invalidParameter('The number of IPv6 addresses or prefixes to assign must be at least 1.');
  return { wantAddrs, n };
}

/**
 * Assigns IPv6 addresses or /80 prefixes to an ENI (all or nothing).
 * @returns the assigned addresses and prefixes (compressed form).
 * @throws Ec2ApiError InvalidNetworkInterfaceID.NotFound, MissingParameter,
 * InvalidParameterCombination, InvalidParameterValue (subnet without IPv6, prefixes on a
 * Xen instance, over the per-interface limit, a bad address/prefix),
 * InvalidIPAddress.InUse, InsufficientCidrBlocks.
 */
export function assignIpv6(
  model: CloudModel,
  eniId: string,
  p: AssignIpv6Input,
): { addresses: string[]; prefixes: string[] } {
  const eni = model.eni(eniId);
  const { wantAddrs, n } = checkRequest(p);
  const subnet = model.state.subnets.get(eni.subnetId)!;
  if (!subnet.ipv6)
    throw invalidParameter(
      `The subnet '${subnet.subnetId}' of network interface '${eniId}' does not have an IPv6 CIDR block associated with it.`,
    );
  const type = model.attachedType(eni);
  if (!wantAddrs && type && type.hypervisor !== 'nitro')
    throw invalidParameter(
      `IPv6 prefixes are not supported on instance type ${type.instanceType} (hypervisor ${type.hypervisor}).`,
    );
  const limit = ipv6Limit(model, eni);
  if (ipv6SlotsUsed(eni) + n > limit)
    throw invalidParameter(
      `Number of IPv6 addresses and prefixes will exceed limit (${limit} per interface${type ? ` for ${type.instanceType}` : ''}).`,
    );
  const a = subnet.ipv6.addresses;
  const instanceId = eni.attachment?.instanceId;
  if (wantAddrs) {
    const addresses = p.addresses?.length ? a.allocateSpecific(p.addresses) : a.allocate(n);
    if (instanceId) model.notifyChange('assign', instanceId);
    eni.ipv6Addresses.push(...addresses);
    return { addresses, prefixes: [] };
  }
  const prefixes = p.prefixes?.length ? a.allocateSpecificPrefixes(p.prefixes) : a.allocatePrefixes(n);
  if (instanceId) model.notifyChange('assign', instanceId);
  eni.ipv6Prefixes.push(...prefixes);
  return { addresses: [], prefixes };
}

/**
 * Unassigns IPv6 addresses and/or /80 prefixes from an ENI, returning them to the subnet
 * (all or nothing). Addresses and prefixes are matched in normalised form.
 * @returns what was unassigned, as the ENI held it.
 * @throws Ec2ApiError InvalidNetworkInterfaceID.NotFound, MissingParameter,
 * InvalidParameterValue (an address or prefix not assigned to that ENI).
 */
export function unassignIpv6(
  model: CloudModel,
  eniId: string,
  addresses: string[],
  prefixes: string[],
): { addresses: string[]; prefixes: string[] } {
  const eni = model.eni(eniId);
  if (addresses.length === 0 && prefixes.length === 0)
    throw new Ec2ApiError('MissingParameter', 'Either Ipv6Addresses or Ipv6Prefix must be specified.');
  const addrs = match(eni.ipv6Addresses, addresses);
  const pfx = match(eni.ipv6Prefixes, prefixes);
  if (addrs.missing.length)
    throw invalidParameter(
      `Some of the specified IPv6 addresses are not assigned to interface ${eniId}: ${addrs.missing.join(', ')}`,
    );
  if (pfx.missing.length)
    throw invalidParameter(
      `Some of the specified IPv6 prefixes are not assigned to interface ${eniId}: ${pfx.missing.join(', ')}`,
    );
  if (eni.attachment) model.notifyChange('unassign', eni.attachment.instanceId);
  const dropA = new Set(addrs.found);
  const dropP = new Set(pfx.found);
  eni.ipv6Addresses = eni.ipv6Addresses.filter((x) => !dropA.has(x));
  eni.ipv6Prefixes = eni.ipv6Prefixes.filter((x) => !dropP.has(x));
  const a = model.state.subnets.get(eni.subnetId)!.ipv6?.addresses;
  a?.release(addrs.found);
  a?.releasePrefixes(pfx.found);
  return { addresses: addrs.found, prefixes: pfx.found };
}

/** Matches requested values against held ones by normalised form (IPv6 has many spellings). */
function match(held: string[], asked: string[]): { found: string[]; missing: string[] } {
  const byNorm = new Map(held.map((h) => [normalise(h), h]));
  const found: string[] = [];
  const missing: string[] = [];
  for (const x of asked) {
    const h = byNorm.get(normalise(x));
    if (h === undefined) missing.push(x);
    else found.push(h);
  }
  return { found, missing };
}

function normalise(x: string): string {
  const [addr = '', len] = x.split('/');
  try {
    return `${bigIntToIpv6(ipv6ToBigInt(addr))}${len === undefined ? '' : `/${len}`}`;
  } catch {
    return x;
  }
}
