/**
 * The one EC2 client wrapper of ipamd: every EC2 call goes through {@link Ec2Api}, which
 * normalises the SDK shapes, counts calls per action and outcome, and maps errors to
 * {@link Ec2Error} with the EC2 error code (AWS EC2 API Reference, "Error codes").
 */
import {
  AssignPrivateIpAddressesCommand, AttachNetworkInterfaceCommand, CreateNetworkInterfaceCommand, CreateTagsCommand,
  DeleteNetworkInterfaceCommand, DescribeInstanceTypesCommand, DescribeNetworkInterfacesCommand, DescribeSubnetsCommand,
  DetachNetworkInterfaceCommand, EC2Client, ModifyNetworkInterfaceAttributeCommand, UnassignPrivateIpAddressesCommand,
  type Filter, type NetworkInterface, type _InstanceType,
} from '@aws-sdk/client-ec2';

/** An EC2 API error with its code (e.g. `InvalidNetworkInterfaceID.NotFound`). */
export class Ec2Error extends Error {
  constructor(readonly action: string, readonly code: string, message: string, readonly httpStatus?: number) {
    super(`${action}: ${code}: ${message}`);
    this.name = 'Ec2Error';
  }
}

/** An ENI as EC2 describes it. */
export interface Ec2Eni {
  eniId: string;
  mac: string;
  status: string;
  subnetId: string;
  vpcId: string;
  description: string;
  primaryIp: string;
  /** Secondary private IPv4s (the primary excluded). */
  secondaryIps: string[];
  ipv4Prefixes: string[];
  attachment?: { attachmentId: string; instanceId: string; deviceIndex: number; status: string; deleteOnTermination: boolean };
  tags: Record<string, string>;
  securityGroupIds: string[];
}

/** Network limits of an instance type (DescribeInstanceTypes `NetworkInfo`). */
export interface InstanceTypeLimits {
  instanceType: string;
  maxEnis: number;
  ipv4PerEni: number;
  hypervisor: string;
}

/** Counter hook: one call per EC2 request with its outcome ("ok" or the error code) and latency in ms. */
export type Ec2CallObserver = (action: string, outcome: string, ms: number) => void;

/** Options of {@link Ec2Api}. */
export interface Ec2ApiOptions {
  region: string;
  /** AWS_EC2_ENDPOINT; unset = the SDK's regional endpoint. */
  endpoint?: string;
  /** SDK max attempts per call (default 3, the SDK standard retry mode). */
  maxAttempts?: number;
  /** Per-call timeout in ms (default 10 000). */
  timeoutMs?: number;
  observe?: Ec2CallObserver;
}

/** Normalised EC2 operations used by ipamd. All methods throw {@link Ec2Error}. */
export class Ec2Api {
  readonly client: EC2Client;
  private readonly timeoutMs: number;
  private readonly observe?: Ec2CallObserver;

  constructor(opts: Ec2ApiOptions) {
    this.client = new EC2Client({ region: opts.region, ...(opts.endpoint ? { endpoint: opts.endpoint } : {}), maxAttempts: opts.maxAttempts ?? 3 });
    this.timeoutMs = opts.timeoutMs ?? 10_000;
    this.observe = opts.observe;
  }

  /** Network limits of one instance type. */
  async instanceTypeLimits(instanceType: string): Promise<InstanceTypeLimits> {
    const out = await this.call('DescribeInstanceTypes', (o) => this.client.send(new DescribeInstanceTypesCommand({ InstanceTypes: [instanceType as _InstanceType] }), o));
    const t = out.InstanceTypes?.[0];
    const ni = t?.NetworkInfo;
    if (!t || !ni?.MaximumNetworkInterfaces || !ni.Ipv4AddressesPerInterface) {
      throw new Ec2Error('DescribeInstanceTypes', 'IncompleteResponse', `no network limits for ${instanceType}`);
    }
    return { instanceType, maxEnis: ni.MaximumNetworkInterfaces, ipv4PerEni: ni.Ipv4AddressesPerInterface, hypervisor: t.Hypervisor ?? 'unknown' };
  }

  /** Describes ENIs by id (any unknown id fails the whole call with NotFound, as EC2 does). */
  async describeEnis(eniIds: string[]): Promise<Ec2Eni[]> {
    if (eniIds.length === 0) return [];
    return this.describeEnisWhere({ NetworkInterfaceIds: eniIds });
  }

  /** Describes ENIs matching filters, following NextToken pages. */
  async describeEnisByFilters(filters: Record<string, string[]>): Promise<Ec2Eni[]> {
    const Filters: Filter[] = Object.entries(filters).map(([Name, Values]) => ({ Name, Values }));
    return this.describeEnisWhere({ Filters });
  }

  /** The IPv4 CIDR and free-address count of a subnet. */
  async describeSubnet(subnetId: string): Promise<{ cidr: string; availableIps: number; vpcId: string }> {
    const out = await this.call('DescribeSubnets', (o) => this.client.send(new DescribeSubnetsCommand({ SubnetIds: [subnetId] }), o));
    const s = out.Subnets?.[0];
    if (!s?.CidrBlock) throw new Ec2Error('DescribeSubnets', 'IncompleteResponse', `subnet ${subnetId} not described`);
    return { cidr: s.CidrBlock, availableIps: s.AvailableIpAddressCount ?? 0, vpcId: s.VpcId ?? '' };
  }

  /** Creates an ENI with tags and `secondaryCount` secondary IPs; returns it (status `available`). */
  async createEni(p: { subnetId: string; description: string; tags: Record<string, string>; secondaryCount: number; securityGroupIds?: string[] }): Promise<Ec2Eni> {
    const out = await this.call('CreateNetworkInterface', (o) => this.client.send(new CreateNetworkInterfaceCommand({
      SubnetId: p.subnetId,
      Description: p.description,
      ...(p.secondaryCount > 0 ? { SecondaryPrivateIpAddressCount: p.secondaryCount } : {}),
      ...(p.securityGroupIds?.length ? { Groups: p.securityGroupIds } : {}),
      TagSpecifications: [{ ResourceType: 'network-interface', Tags: Object.entries(p.tags).map(([Key, Value]) => ({ Key, Value })) }],
    }), o));
    if (!out.NetworkInterface?.NetworkInterfaceId) throw new Ec2Error('CreateNetworkInterface', 'IncompleteResponse', 'no NetworkInterfaceId');
    return normaliseEni(out.NetworkInterface);
  }

  /** Attaches an ENI at a device index; returns the attachment id. */
  async attachEni(eniId: string, instanceId: string, deviceIndex: number): Promise<string> {
    const out = await this.call('AttachNetworkInterface', (o) => this.client.send(new AttachNetworkInterfaceCommand({ NetworkInterfaceId: eniId, InstanceId: instanceId, DeviceIndex: deviceIndex }), o));
    if (!out.AttachmentId) throw new Ec2Error('AttachNetworkInterface', 'IncompleteResponse', 'no AttachmentId');
    return out.AttachmentId;
  }

  /** Sets DeleteOnTermination on an attachment, so terminating the instance frees the ENI. */
  async setDeleteOnTermination(eniId: string, attachmentId: string): Promise<void> {
    await this.call('ModifyNetworkInterfaceAttribute', (o) => this.client.send(new ModifyNetworkInterfaceAttributeCommand({
      NetworkInterfaceId: eniId, Attachment: { AttachmentId: attachmentId, DeleteOnTermination: true },
    }), o));
  }

  /** Assigns `count` secondary IPs to an ENI in one call; returns them. */
  async assignIps(eniId: string, count: number): Promise<string[]> {
    const out = await this.call('AssignPrivateIpAddresses', (o) => this.client.send(new AssignPrivateIpAddressesCommand({ NetworkInterfaceId: eniId, SecondaryPrivateIpAddressCount: count }), o));
    return (out.AssignedPrivateIpAddresses ?? []).map((a) => a.PrivateIpAddress ?? '').filter(Boolean);
  }

  /** Unassigns secondary IPs from an ENI in one call. */
  async unassignIps(eniId: string, ips: string[]): Promise<void> {
    if (ips.length === 0) return;
    await this.call('UnassignPrivateIpAddresses', (o) => this.client.send(new UnassignPrivateIpAddressesCommand({ NetworkInterfaceId: eniId, PrivateIpAddresses: ips }), o));
  }

  /** Detaches an ENI (never forced: a forced detach can strand the OS's view, per the EC2 docs). */
  async detachEni(attachmentId: string): Promise<void> {
    await this.call('DetachNetworkInterface', (o) => this.client.send(new DetachNetworkInterfaceCommand({ AttachmentId: attachmentId, Force: false }), o));
  }

  /** Deletes an ENI; `InvalidNetworkInterfaceID.NotFound` counts as success (already gone). */
  async deleteEni(eniId: string): Promise<void> {
    try {
      await this.call('DeleteNetworkInterface', (o) => this.client.send(new DeleteNetworkInterfaceCommand({ NetworkInterfaceId: eniId }), o));
    } catch (e) {
      if (e instanceof Ec2Error && e.code === 'InvalidNetworkInterfaceID.NotFound') return;
      throw e;
    }
  }

  /** Adds or overwrites tags on a resource. */
  async createTags(resourceId: string, tags: Record<string, string>): Promise<void> {
    await this.call('CreateTags', (o) => this.client.send(new CreateTagsCommand({ Resources: [resourceId], Tags: Object.entries(tags).map(([Key, Value]) => ({ Key, Value })) }), o));
  }

  private async describeEnisWhere(input: { NetworkInterfaceIds?: string[]; Filters?: Filter[] }): Promise<Ec2Eni[]> {
    const out: Ec2Eni[] = [];
    let NextToken: string | undefined;
    do {
      const page = await this.call('DescribeNetworkInterfaces', (o) => this.client.send(new DescribeNetworkInterfacesCommand({ ...input, ...(NextToken ? { NextToken } : {}), ...(input.NetworkInterfaceIds ? {} : { MaxResults: 1000 }) }), o));
      for (const ni of page.NetworkInterfaces ?? []) out.push(normaliseEni(ni));
      NextToken = page.NextToken;
    } while (NextToken);
    return out;
  }

  private async call<T>(action: string, send: (o: { abortSignal: AbortSignal }) => Promise<T>): Promise<T> {
    const t0 = performance.now();
    try {
      const out = await send({ abortSignal: AbortSignal.timeout(this.timeoutMs) });
      this.observe?.(action, 'ok', performance.now() - t0);
      return out;
    } catch (e) {
      const err = e as { name?: string; Code?: string; message?: string; $metadata?: { httpStatusCode?: number } };
      const code = err.Code ?? err.name ?? 'UnknownError';
      this.observe?.(action, code, performance.now() - t0);
      throw new Ec2Error(action, code, err.message ?? String(e), err.$metadata?.httpStatusCode);
    }
  }
}

/** Converts the SDK's NetworkInterface to {@link Ec2Eni}. */
export function normaliseEni(ni: NetworkInterface): Ec2Eni {
  const primary = ni.PrivateIpAddress ?? ni.PrivateIpAddresses?.find((p) => p.Primary)?.PrivateIpAddress ?? '';
  const a = ni.Attachment;
  return {
    eniId: ni.NetworkInterfaceId ?? '',
    mac: (ni.MacAddress ?? '').toLowerCase(),
    status: ni.Status ?? '',
    subnetId: ni.SubnetId ?? '',
    vpcId: ni.VpcId ?? '',
    description: ni.Description ?? '',
    primaryIp: primary,
    secondaryIps: (ni.PrivateIpAddresses ?? []).filter((p) => !p.Primary && p.PrivateIpAddress).map((p) => p.PrivateIpAddress!),
    ipv4Prefixes: (ni.Ipv4Prefixes ?? []).map((p) => p.Ipv4Prefix ?? '').filter(Boolean),
    ...(a?.AttachmentId ? { attachment: { attachmentId: a.AttachmentId, instanceId: a.InstanceId ?? '', deviceIndex: a.DeviceIndex ?? -1, status: a.Status ?? '', deleteOnTermination: a.DeleteOnTermination ?? false } } : {}),
    tags: Object.fromEntries((ni.TagSet ?? []).map((t) => [t.Key ?? '', t.Value ?? ''])),
    securityGroupIds: (ni.Groups ?? []).map((g) => g.GroupId ?? '').filter(Boolean),
  };
}
