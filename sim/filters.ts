/**
 * EC2 Describe* filters and paging (AWS EC2 API Reference, "Filter" and "Pagination"):
 * a resource matches when every filter matches, a filter matches when any of its
 * values matches; values accept the `*` and `?` wildcards. Unknown filter names are
 * rejected with InvalidParameterValue, as EC2 does.
 */
import { Ec2ApiError, invalidParameter } from './ec2-errors.js';
import type { Filter } from './query-params.js';
import { vpcCidrBlocks, type Eni, type Instance, type SimState, type Subnet } from './types.js';

/** Values a resource has for one filter name; undefined = filter name not supported. */
type Extractor<T> = (r: T, name: string) => string[] | undefined;

function globToRegExp(v: string): RegExp {
  return new RegExp(
    `^${v
      .replace(/[.+^${}()|[\]\\]/g, '\\$&')
      .replace(/\*/g, '.*')
      .replace(/\?/g, '.')}$`,
  );
}

function tagValues(tags: Record<string, string>, name: string): string[] | undefined {
  if (name === 'tag-key') return Object.keys(tags);
  if (name === 'tag-value') return Object.values(tags);
  if (name.startsWith('tag:')) {
    const k = name.slice(4);
    return k in tags ? [tags[k]!] : [];
  }
  return undefined;
}

/** Filter values of an ENI (DescribeNetworkInterfaces filter names). */
export const eniFilterValues: Extractor<Eni> = (e, name) => {
  const a = e.attachment;
  switch (name) {
    case 'network-interface-id':
      return [e.networkInterfaceId];
    case 'attachment.instance-id':
      return a ? [a.instanceId] : [];
    case 'attachment.attachment-id':
      return a ? [a.attachmentId] : [];
    case 'attachment.device-index':
      return a ? [String(a.deviceIndex)] : [];
    case 'attachment.status':
      return a ? [a.status] : [];
    case 'attachment.delete-on-termination':
      return a ? [String(a.deleteOnTermination)] : [];
    case 'status':
      return [e.status];
    case 'subnet-id':
      return [e.subnetId];
    case 'vpc-id':
      return [e.vpcId];
    case 'availability-zone':
      return [e.availabilityZone];
    case 'description':
      return [e.description];
    case 'mac-address':
      return [e.macAddress];
    case 'owner-id':
      return [e.ownerId];
    case 'private-ip-address':
    case 'addresses.private-ip-address':
      return [e.primaryIp, ...e.secondaryIps];
    case 'ipv4-prefix':
      return e.ipv4Prefixes;
    case 'group-id':
      return e.securityGroupIds;
    case 'source-dest-check':
      return [String(e.sourceDestCheck)];
    case 'interface-type':
      return ['interface'];
    default:
      return tagValues(e.tags, name);
  }
};

/** Filter values of a subnet (DescribeSubnets filter names; tags from the subnet itself). */
export const subnetFilterValues: Extractor<Subnet> = (s, name) => {
  switch (name) {
    case 'subnet-id':
      return [s.subnetId];
    case 'vpc-id':
      return [s.vpcId];
    case 'availability-zone':
      return [s.availabilityZone];
    case 'cidr-block':
    case 'cidr':
    case 'cidrBlock':
      return [s.cidr];
    case 'state':
      return ['available'];
    case 'available-ip-address-count':
      return [String(s.addresses.freeCount())];
    case 'default-for-az':
      return ['false'];
    default:
      return tagValues(s.tags, name);
  }
};

/** Filter values of the VPC (DescribeVpcs filter names); `tagsOf` gives the VPC's tags. */
export function vpcFilterValues(state: SimState, tagsOf: (id: string) => Record<string, string>): Extractor<SimState> {
  return (_v, name) => {
    switch (name) {
      case 'vpc-id':
        return [state.vpcId];
      case 'cidr':
        return [state.vpcCidr];
      case 'cidr-block-association.cidr-block':
        return vpcCidrBlocks(state);
      case 'state':
        return ['available'];
      case 'is-default':
        return ['false'];
      case 'owner-id':
        return [state.accountId];
      default:
        return tagValues(tagsOf(state.vpcId), name);
    }
  };
}

/** Filter values of an instance (DescribeInstances filter names). */
export function instanceFilterValues(tagsOf: (id: string) => Record<string, string>): Extractor<Instance> {
  return (i, name) => {
    switch (name) {
      case 'instance-id':
        return [i.instanceId];
      case 'instance-type':
        return [i.instanceType];
      case 'subnet-id':
        return [i.subnetId];
      case 'vpc-id':
        return [i.vpcId];
      case 'availability-zone':
        return [i.availabilityZone];
      case 'private-ip-address':
        return [i.privateIpAddress];
      case 'instance-state-name':
        return ['running'];
      default:
        return tagValues(tagsOf(i.instanceId), name);
    }
  };
}

/** Filter names each Describe action supports (besides `tag:<key>`, `tag-key`, `tag-value`). */
export const FILTER_NAMES = {
  eni: new Set([
    'network-interface-id',
    'attachment.instance-id',
    'attachment.attachment-id',
    'attachment.device-index',
    'attachment.status',
    'attachment.delete-on-termination',
    'status',
    'subnet-id',
    'vpc-id',
    'availability-zone',
    'description',
    'mac-address',
    'owner-id',
    'private-ip-address',
    'addresses.private-ip-address',
    'ipv4-prefix',
    'group-id',
    'source-dest-check',
    'interface-type',
  ]),
  subnet: new Set([
    'subnet-id',
    'vpc-id',
    'availability-zone',
    'cidr-block',
    'cidr',
    'cidrBlock',
    'state',
    'available-ip-address-count',
    'default-for-az',
  ]),
  vpc: new Set(['vpc-id', 'cidr', 'cidr-block-association.cidr-block', 'state', 'is-default', 'owner-id']),
  instance: new Set([
    'instance-id',
    'instance-type',
    'subnet-id',
    'vpc-id',
    'availability-zone',
    'private-ip-address',
    'instance-state-name',
  ]),
};

/**
 * Keeps the resources matching every filter.
 * @param known the filter names the action supports (tag filters are always allowed).
 * @throws Ec2ApiError InvalidParameterValue for an unsupported filter name.
 */
export function applyFilters<T>(items: T[], filters: Filter[], values: Extractor<T>, known: Set<string>): T[] {
  const compiled = filters.map((f) => {
    if (!known.has(f.name) && f.name !== 'tag-key' && f.name !== 'tag-value' && !/^tag:.+/.test(f.name)) {
      throw invalidParameter(`The filter '${f.name}' is invalid`);
    }
    return { name: f.name, res: f.values.map(globToRegExp) };
  });
  return items.filter((it) =>
    compiled.every((f) => {
      const have = values(it, f.name) ?? [];
      return f.res.some((re) => have.some((h) => re.test(h)));
    }),
  );
}

/** Opaque NextToken encoding an offset. */
function encodeToken(offset: number): string {
  return Buffer.from(JSON.stringify({ o: offset })).toString('base64url');
}

/**
 * Cuts one page of `items`: `maxResults` (5–1000, per EC2) from the offset in `nextToken`,
 * at most `cap` items (the sim's `describePageSize` knob; may be below EC2's minimum of 5).
 * @throws Ec2ApiError InvalidParameterValue for a bad MaxResults, InvalidNextToken for a bad token.
 */
export function page<T>(
  items: T[],
  maxResults: number | undefined,
  nextToken: string | undefined,
  cap?: number,
): { items: T[]; nextToken?: string } {
  let offset = 0;
  if (nextToken) {
    try {
      const o = (JSON.parse(Buffer.from(nextToken, 'base64url').toString()) as { o?: unknown }).o;
      if (typeof o !== 'number' || !Number.isInteger(o) || o < 0) throw new Error('bad');
      offset = o;
    } catch {
      throw new Ec2ApiError('InvalidNextToken', 'The token provided is invalid or expired.');
    }
  }
  if (maxResults !== undefined && (maxResults < 5 || maxResults > 1000))
    throw invalidParameter(
      `Value ( ${maxResults} ) for parameter maxResults is invalid. Expecting a value between 5 and 1000.`,
    );
  const size = Math.min(maxResults ?? Infinity, cap ?? Infinity);
  if (size === Infinity) return { items: items.slice(offset) };
  const end = offset + size;
  return { items: items.slice(offset, end), ...(end < items.length ? { nextToken: encodeToken(end) } : {}) };
}
