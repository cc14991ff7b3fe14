/**
 * EC2 Query API XML rendering (AWS EC2 API Reference, "Query API responses" and
 * "Error responses"): `<ActionResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">`
 * with a `requestId`, lists as `<xxxSet><item>…</item></xxxSet>`, and errors as
 * `<Response><Errors><Error><Code/><Message/></Error></Errors><RequestID/></Response>`.
 * Element names follow the EC2 service model the AWS SDK parses.
 */
import { XMLBuilder } from 'fast-xml-parser';
import { DEFAULT_SECURITY_GROUP } from './cloud-model.js';
import type { InstanceTypeInfo } from './instance-types.js';
import { vpcCidrBlocks, type Eni, type Instance, type SimState, type Subnet } from './types.js';
import { availabilityZoneId } from './vpc.js';
import { ipv6VpcAssociationId } from './vpc-ipv6.js';

/** EC2 API version served. */
export const EC2_API_VERSION = '2016-11-15';
const XMLNS = `http://ec2.amazonaws.com/doc/${EC2_API_VERSION}/`;

const builder = new XMLBuilder({
  ignoreAttributes: false,
  attributeNamePrefix: '@_',
  suppressEmptyNode: false,
  processEntities: true,
});

/** A JSON-ish tree that XMLBuilder turns into elements. */
export type XmlTree = Record<string, unknown>;

/** `<name><item>…</item>…</name>` content for a list. */
export function set(items: unknown[]): { item: unknown[] } {
  return { item: items };
}

/** Renders a successful response for `action`. */
export function renderResponse(action: string, requestId: string, body: XmlTree): string {
  return `<?xml version="1.0" encoding="UTF-8"?>\n${builder.build({ [`${action}Response`]: { '@_xmlns': XMLNS, requestId, ...body } })}`;
}

/** Renders an EC2 error document. */
export function renderError(code: string, message: string, requestId: string): string {
  return `<?xml version="1.0" encoding="UTF-8"?>\n${builder.build({ Response: { Errors: { Error: { Code: code, Message: message } }, RequestID: requestId } })}`;
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

function tagSet(tags: Record<string, string>): { item: unknown[] } {
  return set(Object.entries(tags).map(([key, value]) => ({ key, value })));
}

function groupSet(ids: string[]): { item: unknown[] } {
  return set(ids.map((groupId) => ({ groupId, groupName: groupId === DEFAULT_SECURITY_GROUP ? 'default' : groupId })));
}

function privateIps(eni: Eni): { item: unknown[] } {
  return set([
    { privateIpAddress: eni.primaryIp, primary: true },
    ...eni.secondaryIps.map((ip) => ({ privateIpAddress: ip, primary: false })),
  ]);
}

/**
 * An ENI's IPv6 sets: `ipv6AddressesSet` (items `ipv6Address`, `isPrimaryIpv6`: EC2
 * `NetworkInterfaceIpv6Address` / `InstanceIpv6Address`) and `ipv6PrefixSet` (items
 * `ipv6Prefix`: `Ipv6PrefixSpecification`), element names as the EC2 service model has them.
 */
function ipv6Sets(eni: Eni): XmlTree {
  return {
    ipv6AddressesSet: set(eni.ipv6Addresses.map((ipv6Address) => ({ ipv6Address, isPrimaryIpv6: false }))),
    ipv6PrefixSet: set(eni.ipv6Prefixes.map((ipv6Prefix) => ({ ipv6Prefix }))),
  };
}

/** EC2 `NetworkInterface` (DescribeNetworkInterfaces item, CreateNetworkInterface result). */
export function eniXml(eni: Eni): XmlTree {
  const a = eni.attachment;
  return {
    networkInterfaceId: eni.networkInterfaceId,
    subnetId: eni.subnetId,
    vpcId: eni.vpcId,
    availabilityZone: eni.availabilityZone,
    description: eni.description,
    ownerId: eni.ownerId,
    requesterManaged: false,
    status: eni.status,
    macAddress: eni.macAddress,
    privateIpAddress: eni.primaryIp,
    sourceDestCheck: eni.sourceDestCheck,
    interfaceType: 'interface',
    groupSet: groupSet(eni.securityGroupIds),
    ...(a
      ? {
          attachment: {
            attachmentId: a.attachmentId,
            instanceId: a.instanceId,
            instanceOwnerId: eni.ownerId,
            deviceIndex: a.deviceIndex,
            networkCardIndex: 0,
            status: a.status,
            attachTime: iso(a.attachTime),
            deleteOnTermination: a.deleteOnTermination,
          },
        }
      : {}),
    tagSet: tagSet(eni.tags),
    privateIpAddressesSet: privateIps(eni),
    ipv4PrefixSet: set(eni.ipv4Prefixes.map((ipv4Prefix) => ({ ipv4Prefix }))),
    ...ipv6Sets(eni),
  };
}

/** EC2 `InstanceNetworkInterface` (inside DescribeInstances). */
function instanceEniXml(eni: Eni): XmlTree {
  const a = eni.attachment!;
  return {
    networkInterfaceId: eni.networkInterfaceId,
    subnetId: eni.subnetId,
    vpcId: eni.vpcId,
    description: eni.description,
    ownerId: eni.ownerId,
    status: eni.status,
    macAddress: eni.macAddress,
    privateIpAddress: eni.primaryIp,
    sourceDestCheck: eni.sourceDestCheck,
    interfaceType: 'interface',
    groupSet: groupSet(eni.securityGroupIds),
    attachment: {
      attachmentId: a.attachmentId,
      deviceIndex: a.deviceIndex,
      networkCardIndex: 0,
      status: a.status,
      attachTime: iso(a.attachTime),
      deleteOnTermination: a.deleteOnTermination,
    },
    privateIpAddressesSet: privateIps(eni),
    ipv4PrefixSet: set(eni.ipv4Prefixes.map((ipv4Prefix) => ({ ipv4Prefix }))),
    ...ipv6Sets(eni),
  };
}

/** EC2 `Reservation` holding one instance, with its attached ENIs by device index. */
export function reservationXml(state: SimState, inst: Instance, tags: Record<string, string>): XmlTree {
  const enis = [...state.enis.values()]
    .filter((e) => e.attachment?.instanceId === inst.instanceId)
    .sort((x, y) => x.attachment!.deviceIndex - y.attachment!.deviceIndex);
  const primary = state.enis.get(inst.primaryEniId);
  return {
    reservationId: inst.reservationId,
    ownerId: state.accountId,
    groupSet: set([]),
    instancesSet: set([
      {
        instanceId: inst.instanceId,
        imageId: 'ami-0sim000000000000',
        instanceState: { code: 16, name: 'running' },
        privateDnsName: `ip-${inst.privateIpAddress.replace(/\./g, '-')}.${state.region}.compute.internal`,
        instanceType: inst.instanceType,
        launchTime: iso(inst.launchTime),
        placement: { availabilityZone: inst.availabilityZone, tenancy: 'default' },
        subnetId: inst.subnetId,
        vpcId: inst.vpcId,
        privateIpAddress: inst.privateIpAddress,
        sourceDestCheck: primary?.sourceDestCheck ?? true,
        groupSet: groupSet(primary?.securityGroupIds ?? []),
        architecture: 'x86_64',
        rootDeviceType: 'ebs',
        hypervisor: 'xen', // the Instance.Hypervisor enum is ovm|xen (Nitro instances report xen); DescribeInstanceTypes tells nitro apart
        virtualizationType: 'hvm',
        tagSet: tagSet(tags),
        networkInterfaceSet: set(enis.map(instanceEniXml)),
      },
    ]),
  };
}

/** EC2 `Subnet` (AWS EC2 API Reference, "Subnet"); tags are the subnet's own. */
export function subnetXml(state: SimState, s: Subnet): XmlTree {
  return {
    subnetId: s.subnetId,
    subnetArn: `arn:aws:ec2:${state.region}:${state.accountId}:subnet/${s.subnetId}`,
    state: 'available',
    ownerId: state.accountId,
    vpcId: s.vpcId,
    cidrBlock: s.cidr,
    availableIpAddressCount: s.addresses.freeCount(),
    availabilityZone: s.availabilityZone,
    availabilityZoneId: availabilityZoneId(state.region, s.availabilityZone),
    defaultForAz: false,
    mapPublicIpOnLaunch: false,
    assignIpv6AddressOnCreation: s.assignIpv6AddressOnCreation ?? false,
    ipv6CidrBlockAssociationSet: set(
      s.ipv6
        ? [
            {
              associationId: s.ipv6.associationId,
              ipv6CidrBlock: s.ipv6.cidr,
              ipv6CidrBlockState: { state: 'associated' },
              ipSource: 'amazon',
              ipv6AddressAttribute: 'public',
            },
          ]
        : [],
    ),
    tagSet: tagSet(s.tags),
  };
}

/**
 * Association id of the VPC's `index`-th IPv4 CIDR block (0 = primary), stable for the
 * sim's life: `vpc-cidr-assoc-` + 17 hex digits derived from the VPC id and the index.
 */
export function cidrAssociationId(vpcId: string, index: number): string {
  return `vpc-cidr-assoc-${vpcId.slice(-16)}${index.toString(16)}`.slice(0, 32);
}

/** EC2 `Vpc` with its `cidrBlockAssociationSet` (AWS EC2 API Reference, "Vpc", "VpcCidrBlockAssociation"). */
export function vpcXml(state: SimState, tags: Record<string, string>): XmlTree {
  return {
    vpcId: state.vpcId,
    ownerId: state.accountId,
    state: 'available',
    cidrBlock: state.vpcCidr,
    cidrBlockAssociationSet: set(
      vpcCidrBlocks(state).map((cidrBlock, i) => ({
        associationId: cidrAssociationId(state.vpcId, i),
        cidrBlock,
        cidrBlockState: { state: 'associated' },
      })),
    ),
    ipv6CidrBlockAssociationSet: set(
      (state.vpcIpv6Cidrs ?? []).map((ipv6CidrBlock, i) => ({
        associationId: ipv6VpcAssociationId(state.vpcId, i),
        ipv6CidrBlock,
        ipv6CidrBlockState: { state: 'associated' },
        networkBorderGroup: state.region,
        ipv6Pool: 'Amazon',
        ipSource: 'amazon',
        ipv6AddressAttribute: 'public',
      })),
    ),
    dhcpOptionsId: 'dopt-0sim0000000000001',
    instanceTenancy: 'default',
    isDefault: false,
    tagSet: tagSet(tags),
  };
}

/** EC2 `InstanceTypeInfo` (network figures only, plus the basics). */
export function instanceTypeXml(t: InstanceTypeInfo): XmlTree {
  return {
    instanceType: t.instanceType,
    currentGeneration: true,
    hypervisor: t.hypervisor,
    vCpuInfo: { defaultVCpus: t.vcpus },
    memoryInfo: { sizeInMiB: t.memoryMiB },
    networkInfo: {
      networkPerformance: 'Up to 10 Gigabit',
      maximumNetworkInterfaces: t.maxEnis,
      maximumNetworkCards: 1,
      defaultNetworkCardIndex: 0,
      networkCards: set([
        { networkCardIndex: 0, networkPerformance: 'Up to 10 Gigabit', maximumNetworkInterfaces: t.maxEnis },
      ]),
      ipv4AddressesPerInterface: t.ipv4PerEni,
      ipv6AddressesPerInterface: t.ipv6PerEni,
      ipv6Supported: true,
      enaSupport: t.hypervisor === 'nitro' ? 'required' : 'unsupported',
    },
  };
}
