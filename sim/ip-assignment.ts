/**
 * AssignPrivateIpAddresses / UnassignPrivateIpAddresses on the model (AWS EC2 API
 * Reference for both actions). The per-ENI IPv4 limit counts the primary IP, each
 * secondary IP and each /28 prefix as one slot; prefixes need a Nitro instance.
 */
import { Ec2ApiError, invalidParameter } from './ec2-errors.js';
import { CloudModel } from './cloud-model.js';

/** What to assign: a count or explicit list of IPs, or a count or list of /28 prefixes. */
export interface AssignInput {
  secondaryCount?: number;
  ips?: string[];
  prefixCount?: number;
  prefixes?: string[];
}

/**
 * Assigns secondary IPs or prefixes to an ENI (all or nothing).
 * @returns the assigned IPs and prefixes.
 * @throws Ec2ApiError InvalidNetworkInterfaceID.NotFound, MissingParameter,
 * InvalidParameterCombination, InvalidParameterValue (prefixes on a Xen instance),
 * PrivateIpAddressLimitExceeded, InsufficientFreeAddressesInSubnet, InsufficientCidrBlocks.
 */
export function assignAddresses(
  model: CloudModel,
  eniId: string,
  p: AssignInput,
): { ips: string[]; prefixes: string[] } {
  const eni = model.eni(eniId);
  const wantIps = p.secondaryCount !== undefined || (p.ips?.length ?? 0) > 0;
  const wantPrefixes = p.prefixCount !== undefined || (p.prefixes?.length ?? 0) > 0;
  if (!wantIps && !wantPrefixes) {
    throw new Ec2ApiError(
      'MissingParameter',
      'Either SecondaryPrivateIpAddressCount, PrivateIpAddress, Ipv4PrefixCount or Ipv4Prefix must be specified.',
    );
  }
  if (wantIps && wantPrefixes)
    throw new Ec2ApiError(
      'InvalidParameterCombination',
      'IPv4 addresses and IPv4 prefixes cannot be assigned in the same request.',
    );
  if (p.secondaryCount !== undefined && p.ips?.length)
    throw new Ec2ApiError(
      'InvalidParameterCombination',
      'SecondaryPrivateIpAddressCount and PrivateIpAddress cannot both be specified.',
    );
  if (p.prefixCount !== undefined && p.prefixes?.length)
    throw new Ec2ApiError('InvalidParameterCombination', 'Ipv4PrefixCount and Ipv4Prefix cannot both be specified.');
  const n = wantIps ? (p.secondaryCount ?? p.ips!.length) : (p.prefixCount ?? p.prefixes!.length);
  if (n < 1) throw invalidParameter('The number of addresses or prefixes to assign must be at least 1.');
  const type = model.attachedType(eni);
  if (wantPrefixes && type && type.hypervisor !== 'nitro') {
    throw invalidParameter(
      `IPv4 prefixes are not supported on instance type ${type.instanceType} (hypervisor ${type.hypervisor}).`,
    );
  }
  const limit = model.ipv4Limit(eni);
  if (CloudModel.slotsUsed(eni) + n > limit) {
    throw new Ec2ApiError(
      'PrivateIpAddressLimitExceeded',
      `Number of private addresses will exceed limit (${limit} per interface${type ? ` for ${type.instanceType}` : ''}).`,
    );
  }
  const a = model.state.subnets.get(eni.subnetId)!.addresses;
  const instanceId = eni.attachment?.instanceId;
  if (wantIps) {
    let ips: string[];
    if (p.ips?.length) {
      a.allocateSpecific(p.ips);
      ips = [...p.ips];
    } else ips = a.allocate(n);
    if (instanceId) notify(model, 'assign', instanceId);
    eni.secondaryIps.push(...ips);
    return { ips, prefixes: [] };
  }
  const prefixes = p.prefixes?.length ? a.allocateSpecificPrefixes(p.prefixes) : a.allocatePrefixes(n);
  if (instanceId) notify(model, 'assign', instanceId);
  eni.ipv4Prefixes.push(...prefixes);
  return { ips: [], prefixes };
}

/**
 * Unassigns secondary IPs and/or prefixes from an ENI, returning them to the subnet
 * (all or nothing).
 * @throws Ec2ApiError InvalidNetworkInterfaceID.NotFound, MissingParameter,
 * InvalidParameterValue (an address/prefix not assigned to that ENI, or its primary IP).
 */
export function unassignAddresses(model: CloudModel, eniId: string, ips: string[], prefixes: string[]): void {
  const eni = model.eni(eniId);
  if (ips.length === 0 && prefixes.length === 0)
    throw new Ec2ApiError('MissingParameter', 'Either PrivateIpAddress or Ipv4Prefix must be specified.');
  if (ips.includes(eni.primaryIp))
    throw invalidParameter(
      `The primary private IP address ${eni.primaryIp} of interface ${eniId} cannot be unassigned.`,
    );
  const notOn = ips.filter((ip) => !eni.secondaryIps.includes(ip));
  if (notOn.length)
    throw invalidParameter(
      `Some of the specified addresses are not assigned to interface ${eniId}: ${notOn.join(', ')}`,
    );
  const prefixNotOn = prefixes.filter((px) => !eni.ipv4Prefixes.includes(px));
  if (prefixNotOn.length)
    throw invalidParameter(
      `Some of the specified prefixes are not assigned to interface ${eniId}: ${prefixNotOn.join(', ')}`,
    );
  if (eni.attachment) notify(model, 'unassign', eni.attachment.instanceId);
  const dropIps = new Set(ips);
  const dropPrefixes = new Set(prefixes);
  eni.secondaryIps = eni.secondaryIps.filter((ip) => !dropIps.has(ip));
  eni.ipv4Prefixes = eni.ipv4Prefixes.filter((px) => !dropPrefixes.has(px));
  const a = model.state.subnets.get(eni.subnetId)!.addresses;
  a.release([...dropIps]);
  a.releasePrefixes([...dropPrefixes]);
}

function notify(model: CloudModel, kind: 'assign' | 'unassign', instanceId: string): void {
  model.notifyChange(kind, instanceId);
}
