/**
 * The EC2 Query API actions the simulated cloud serves: each reads the raw form
 * parameters, applies the change to the model, and returns the response body tree
 * (field names as in the AWS EC2 API Reference for that action).
 */
import { Ec2ApiError, eniNotFound, invalidParameter } from './ec2-errors.js';
import { CloudModel } from './cloud-model.js';
import { assignAddresses, unassignAddresses } from './ip-assignment.js';
import { assignIpv6Addresses, unassignIpv6Addresses } from './ec2-actions-ipv6.js';
import { INSTANCE_TYPES, instanceTypeInfo } from './instance-types.js';
import {
  FILTER_NAMES,
  applyFilters,
  eniFilterValues,
  instanceFilterValues,
  page,
  subnetFilterValues,
  vpcFilterValues,
} from './filters.js';
import {
  filters,
  list,
  optBool,
  optInt,
  optString,
  reqInt,
  reqString,
  tagSpecifications,
  tags,
  type QueryParams,
} from './query-params.js';
import { eniXml, instanceTypeXml, reservationXml, set, subnetXml, vpcXml, type XmlTree } from './ec2-xml.js';

/** One action handler: params in, response body out. @throws Ec2ApiError */
export type ActionHandler = (model: CloudModel, p: QueryParams) => XmlTree;

const tagsOf =
  (model: CloudModel) =>
  (id: string): Record<string, string> =>
    model.resourceTags.get(id) ?? {};

const describeNetworkInterfaces: ActionHandler = (model, p) => {
  const ids = list(p, 'NetworkInterfaceId');
  let enis = [...model.state.enis.values()];
  if (ids.length) {
    const missing = ids.filter((id) => !model.state.enis.has(id));
    if (missing.length) throw eniNotFound(missing);
    const want = new Set(ids);
    enis = enis.filter((e) => want.has(e.networkInterfaceId));
  }
  enis = applyFilters(enis, filters(p), eniFilterValues, FILTER_NAMES.eni);
  const pg = page(enis, optInt(p, 'MaxResults', 0, 1000), optString(p, 'NextToken'), model.faults.describePageSize);
  return { networkInterfaceSet: set(pg.items.map(eniXml)), ...(pg.nextToken ? { nextToken: pg.nextToken } : {}) };
};

const describeSubnets: ActionHandler = (model, p) => {
  const ids = list(p, 'SubnetId');
  let subnets = [...model.state.subnets.values()];
  if (ids.length) {
    const missing = ids.filter((id) => !model.state.subnets.has(id));
    if (missing.length)
      throw new Ec2ApiError('InvalidSubnetID.NotFound', `The subnet ID '${missing.join("', '")}' does not exist`);
    subnets = subnets.filter((s) => ids.includes(s.subnetId));
  }
  subnets = applyFilters(subnets, filters(p), subnetFilterValues, FILTER_NAMES.subnet);
  const pg = page(subnets, optInt(p, 'MaxResults', 0, 1000), optString(p, 'NextToken'), model.faults.describePageSize);
  return {
    subnetSet: set(pg.items.map((s) => subnetXml(model.state, s))),
    ...(pg.nextToken ? { nextToken: pg.nextToken } : {}),
  };
};

const describeVpcs: ActionHandler = (model, p) => {
  const st = model.state;
  const ids = list(p, 'VpcId');
  const missing = ids.filter((id) => id !== st.vpcId);
  if (missing.length)
    throw new Ec2ApiError('InvalidVpcID.NotFound', `The vpc ID '${missing.join("', '")}' does not exist`);
  const vpcs = applyFilters([st], filters(p), vpcFilterValues(st, tagsOf(model)), FILTER_NAMES.vpc);
  return { vpcSet: set(vpcs.map((v) => vpcXml(v, tagsOf(model)(v.vpcId)))) };
};

const describeInstances: ActionHandler = (model, p) => {
  const ids = list(p, 'InstanceId');
  let insts = [...model.state.instances.values()];
  if (ids.length) {
    const missing = ids.filter((id) => !model.state.instances.has(id));
    if (missing.length)
      throw new Ec2ApiError(
        'InvalidInstanceID.NotFound',
        `The instance ID${missing.length > 1 ? 's' : ''} '${missing.join("', '")}' do${missing.length > 1 ? '' : 'es'} not exist`,
      );
    insts = insts.filter((i) => ids.includes(i.instanceId));
  }
  insts = applyFilters(insts, filters(p), instanceFilterValues(tagsOf(model)), FILTER_NAMES.instance);
  const pg = page(insts, optInt(p, 'MaxResults', 0, 1000), optString(p, 'NextToken'), model.faults.describePageSize);
  return {
    reservationSet: set(pg.items.map((i) => reservationXml(model.state, i, tagsOf(model)(i.instanceId)))),
    ...(pg.nextToken ? { nextToken: pg.nextToken } : {}),
  };
};

const describeInstanceTypes: ActionHandler = (model, p) => {
  const names = list(p, 'InstanceType');
  const unknown = names.filter((n) => !instanceTypeInfo(n));
  if (unknown.length)
    throw new Ec2ApiError(
      'InvalidInstanceType',
      `The following supplied instance types do not exist: [${unknown.join(', ')}]`,
    );
  const types = names.length ? names.map((n) => instanceTypeInfo(n)!) : [...INSTANCE_TYPES.values()];
  const pg = page(types, optInt(p, 'MaxResults', 0, 1000), optString(p, 'NextToken'), model.faults.describePageSize);
  return { instanceTypeSet: set(pg.items.map(instanceTypeXml)), ...(pg.nextToken ? { nextToken: pg.nextToken } : {}) };
};

const createNetworkInterface: ActionHandler = (model, p) => {
  // ClientToken idempotency (AWS EC2 API Reference, "Ensure idempotency"): a retry with
  // the same token returns the ENI the first request created instead of a second one.
  const token = optString(p, 'ClientToken');
  const earlier = token ? model.state.enis.get(model.clientTokens.get(token) ?? '') : undefined;
  if (earlier) return { networkInterface: eniXml(earlier), clientToken: token };
  // PrivateIpAddresses.N.PrivateIpAddress / .Primary (PrivateIpAddressSpecification)
  let primary = optString(p, 'PrivateIpAddress');
  const secondaryIps: string[] = [];
  for (let i = 1; p[`PrivateIpAddresses.${i}.PrivateIpAddress`] !== undefined; i++) {
    const ip = p[`PrivateIpAddresses.${i}.PrivateIpAddress`]!;
    if (p[`PrivateIpAddresses.${i}.Primary`] === 'true') {
      if (primary && primary !== ip)
        throw new Ec2ApiError('InvalidParameterCombination', 'Only one primary private IP address can be specified');
      primary = ip;
    } else secondaryIps.push(ip);
  }
  const prefixes: string[] = [];
  for (let i = 1; p[`Ipv4Prefix.${i}.Ipv4Prefix`] !== undefined; i++) prefixes.push(p[`Ipv4Prefix.${i}.Ipv4Prefix`]!);
  const eni = model.createEni({
    subnetId: reqString(p, 'SubnetId'),
    description: optString(p, 'Description') ?? '',
    ...(primary ? { privateIpAddress: primary } : {}),
    secondaryIps,
    secondaryCount: optInt(p, 'SecondaryPrivateIpAddressCount', 0, 49) ?? 0,
    prefixCount: optInt(p, 'Ipv4PrefixCount', 0, 49) ?? 0,
    prefixes,
    tags: tagSpecifications(p, 'network-interface'),
    securityGroupIds: list(p, 'SecurityGroupId'),
  });
  if (token) model.clientTokens.set(token, eni.networkInterfaceId);
  return { networkInterface: eniXml(eni), ...(token ? { clientToken: token } : {}) };
};

const attachNetworkInterface: ActionHandler = (model, p) => {
  const card = optInt(p, 'NetworkCardIndex', 0, 15);
  if (card !== undefined && card !== 0)
    throw invalidParameter(`Network card index ${card} is not valid for this instance type`);
  const attachmentId = model.attachEni(
    reqString(p, 'NetworkInterfaceId'),
    reqString(p, 'InstanceId'),
    reqInt(p, 'DeviceIndex', 0, 127),
  );
  return { attachmentId, networkCardIndex: 0 };
};

const detachNetworkInterface: ActionHandler = (model, p) => {
  optBool(p, 'Force'); // validated; a forced detach behaves like a normal one here
  model.detachEni(reqString(p, 'AttachmentId'));
  return { return: true };
};

const deleteNetworkInterface: ActionHandler = (model, p) => {
  model.deleteEni(reqString(p, 'NetworkInterfaceId'));
  return { return: true };
};

const modifyNetworkInterfaceAttribute: ActionHandler = (model, p) => {
  const eni = model.eni(reqString(p, 'NetworkInterfaceId'));
  const attId = optString(p, 'Attachment.AttachmentId');
  const dot = optBool(p, 'Attachment.DeleteOnTermination');
  const desc = optString(p, 'Description.Value');
  const sdc = optBool(p, 'SourceDestCheck.Value');
  const groups = list(p, 'SecurityGroupId');
  if (attId === undefined && desc === undefined && sdc === undefined && groups.length === 0) {
    throw new Ec2ApiError(
      'MissingParameter',
      'One of Attachment, Description, SourceDestCheck or SecurityGroupId must be specified',
    );
  }
  if (attId !== undefined) {
    if (!eni.attachment || eni.attachment.attachmentId !== attId)
      throw new Ec2ApiError('InvalidAttachmentID.NotFound', `The attachment ID '${attId}' does not exist`);
    if (dot === undefined)
      throw new Ec2ApiError(
        'MissingParameter',
        'The request must contain the parameter Attachment.DeleteOnTermination',
      );
    eni.attachment.deleteOnTermination = dot;
  }
  if (desc !== undefined) eni.description = desc;
  if (sdc !== undefined) eni.sourceDestCheck = sdc;
  if (groups.length) eni.securityGroupIds = groups;
  return { return: true };
};

const assignPrivateIpAddresses: ActionHandler = (model, p) => {
  const eniId = reqString(p, 'NetworkInterfaceId');
  optBool(p, 'AllowReassignment');
  const r = assignAddresses(model, eniId, {
    ...(p.SecondaryPrivateIpAddressCount !== undefined
      ? { secondaryCount: optInt(p, 'SecondaryPrivateIpAddressCount', 0, 1000) }
      : {}),
    ips: list(p, 'PrivateIpAddress'),
    ...(p.Ipv4PrefixCount !== undefined ? { prefixCount: optInt(p, 'Ipv4PrefixCount', 0, 1000) } : {}),
    prefixes: list(p, 'Ipv4Prefix'),
  });
  return {
    networkInterfaceId: eniId,
    assignedPrivateIpAddressesSet: set(r.ips.map((privateIpAddress) => ({ privateIpAddress }))),
    assignedIpv4PrefixSet: set(r.prefixes.map((ipv4Prefix) => ({ ipv4Prefix }))),
    return: true,
  };
};

const unassignPrivateIpAddresses: ActionHandler = (model, p) => {
  unassignAddresses(model, reqString(p, 'NetworkInterfaceId'), list(p, 'PrivateIpAddress'), list(p, 'Ipv4Prefix'));
  return { return: true };
};

const createTags: ActionHandler = (model, p) => {
  const ids = list(p, 'ResourceId');
  if (!ids.length) throw new Ec2ApiError('MissingParameter', 'The request must contain the parameter ResourceId');
  const t = tags(p, 'Tag');
  if (!Object.keys(t).length) throw new Ec2ApiError('MissingParameter', 'The request must contain the parameter Tag');
  model.createTags(ids, t);
  return { return: true };
};

/** Handlers by EC2 action name. */
export const ACTIONS: ReadonlyMap<string, ActionHandler> = new Map([
  ['DescribeInstances', describeInstances],
  ['DescribeInstanceTypes', describeInstanceTypes],
  ['DescribeNetworkInterfaces', describeNetworkInterfaces],
  ['DescribeSubnets', describeSubnets],
  ['DescribeVpcs', describeVpcs],
  ['CreateNetworkInterface', createNetworkInterface],
  ['AttachNetworkInterface', attachNetworkInterface],
  ['DetachNetworkInterface', detachNetworkInterface],
  ['DeleteNetworkInterface', deleteNetworkInterface],
  ['ModifyNetworkInterfaceAttribute', modifyNetworkInterfaceAttribute],
  ['AssignPrivateIpAddresses', assignPrivateIpAddresses],
  ['UnassignPrivateIpAddresses', unassignPrivateIpAddresses],
  ['AssignIpv6Addresses', assignIpv6Addresses],
  ['UnassignIpv6Addresses', unassignIpv6Addresses],
  ['CreateTags', createTags],
]);

/**
 * The instance a call concerns, read from the state before the call: `InstanceId`, the
 * ENI's attachment (`NetworkInterfaceId` / `AttachmentId`) or an `attachment.instance-id` filter.
 */
export function callInstanceId(model: CloudModel, p: QueryParams): string | undefined {
  if (p.InstanceId) return p.InstanceId;
  if (p['InstanceId.1'] && !p['InstanceId.2']) return p['InstanceId.1'];
  const eniId = p.NetworkInterfaceId ?? p['NetworkInterfaceId.1'];
  if (eniId) return model.state.enis.get(eniId)?.attachment?.instanceId;
  if (p.AttachmentId) {
    for (const e of model.state.enis.values())
      if (e.attachment?.attachmentId === p.AttachmentId) return e.attachment.instanceId;
  }
  try {
    for (const f of filters(p)) if (f.name === 'attachment.instance-id' && f.values.length === 1) return f.values[0];
  } catch {
    // malformed filters: the call itself reports them
  }
  return undefined;
}
