/**
 * The one EC2 client wrapper of ipamd, and the implementation of the {@link Ec2Port} (the
 * narrow part the controller uses) that ipamd runs with: every EC2 call goes through {@link Ec2Api}.
 * The operations live here; the budget, retries, timeouts and SDK loading in ./ec2-call.ts,
 * the options in ./ec2-options.ts and the SDK shape mapping in ./ec2-normalise.ts.
 */
import { AnswerParseError, checkAll } from './answer-parse.js';
import type { Filter, _InstanceType } from '@aws-sdk/client-ec2';
import { Ec2Caller } from './ec2-call.js';
import { normaliseEni } from './ec2-normalise.js';
import type { Ec2CallOptions, InstanceTypeLimits } from './ec2-options.js';
import { Ec2Error, type Ec2Eni, type Ec2Port, type Ec2Subnet } from './ec2-port.js';

export { Ec2Caller } from './ec2-call.js';
export { normaliseEni } from './ec2-normalise.js';
export {
  DEFAULT_EC2_BURST,
  DEFAULT_EC2_MAX_ATTEMPTS,
  DEFAULT_EC2_RATE,
  DEFAULT_EC2_TIMEOUT_MS,
  type Ec2ApiOptions,
  type Ec2CallInfo,
  type Ec2CallObserver,
  type Ec2CallOptions,
  type Ec2RetryObserver,
  type Ec2WaitObserver,
  type InstanceTypeLimits,
} from './ec2-options.js';
export { Ec2Error, type CreateEniRequest, type Ec2Eni, type Ec2Port, type Ec2Subnet } from './ec2-port.js';

/** Normalised EC2 operations used by ipamd. All methods throw {@link Ec2Error}. */
export class Ec2Api extends Ec2Caller {
  /** Network limits of one instance type (DescribeInstanceTypes `NetworkInfo`, `Hypervisor`, `BareMetal`). */
  async instanceTypeLimits(instanceType: string, opts?: Ec2CallOptions): Promise<InstanceTypeLimits> {
    const out = await this.call(
      'DescribeInstanceTypes',
      (o) =>
        this.sdk((c, m) =>
          c.send(new m.DescribeInstanceTypesCommand({ InstanceTypes: [instanceType as _InstanceType] }), o),
        ),
      opts,
    );
    const t = out.InstanceTypes?.[0];
    const ni = t?.NetworkInfo;
    if (!t || !ni?.MaximumNetworkInterfaces || !ni.Ipv4AddressesPerInterface) {
      throw new Ec2Error('DescribeInstanceTypes', 'IncompleteResponse', `no network limits for ${instanceType}`);
    }
    return {
      instanceType,
      maxEnis: ni.MaximumNetworkInterfaces,
      ipv4PerEni: ni.Ipv4AddressesPerInterface,
      hypervisor: t.Hypervisor ?? 'unknown',
      bareMetal: t.BareMetal ?? false,
    };
  }

  /** Describes ENIs by id (any unknown id fails the whole call with NotFound, as EC2 does). */
  async describeEnis(eniIds: string[]): Promise<Ec2Eni[]> {
    if (eniIds.length === 0) return [];
    return this.describeEnisWhere({ NetworkInterfaceIds: eniIds });
  }

  /** Describes ENIs matching filters, following NextToken pages (`opts` apply to each page). */
  async describeEnisByFilters(filters: Record<string, string[]>, opts?: Ec2CallOptions): Promise<Ec2Eni[]> {
    const Filters: Filter[] = Object.entries(filters).map(([Name, Values]) => ({ Name, Values }));
    return this.describeEnisWhere({ Filters }, opts);
  }

  /** The IPv4 CIDR and free-address count of a subnet. */
  async describeSubnet(subnetId: string): Promise<{ cidr: string; availableIps: number; vpcId: string }> {
    const out = await this.call('DescribeSubnets', (o) =>
      this.sdk((c, m) => c.send(new m.DescribeSubnetsCommand({ SubnetIds: [subnetId] }), o)),
    );
    const s = out.Subnets?.[0];
    if (!s?.CidrBlock) throw new Ec2Error('DescribeSubnets', 'IncompleteResponse', `subnet ${subnetId} not described`);
    return { cidr: s.CidrBlock, availableIps: s.AvailableIpAddressCount ?? 0, vpcId: s.VpcId ?? '' };
  }

  /**
   * DescribeSubnets with filters (EC2 filter names → values), following NextToken pages
   * (MaxResults 1000). A subnet without a CIDR block in the answer is left out; its
   * associated IPv6 blocks (`Ipv6CidrBlockAssociationSet`, state `associated`) are kept.
   * @throws Ec2Error (the whole call fails: never a partial list).
   */
  async describeSubnets(filters: Record<string, string[]>): Promise<Ec2Subnet[]> {
    const Filters: Filter[] = Object.entries(filters).map(([Name, Values]) => ({ Name, Values }));
    const out: Ec2Subnet[] = [];
    let NextToken: string | undefined;
    do {
      const page = await this.call('DescribeSubnets', (o) =>
        this.sdk((c, m) =>
          c.send(new m.DescribeSubnetsCommand({ Filters, MaxResults: 1000, ...(NextToken ? { NextToken } : {}) }), o),
        ),
      );
      for (const s of page.Subnets ?? []) {
        if (!s.SubnetId || !s.CidrBlock) continue;
        const tags: Record<string, string> = {};
        for (const t of s.Tags ?? []) if (t.Key) tags[t.Key] = t.Value ?? '';
        const ipv6Cidrs = (s.Ipv6CidrBlockAssociationSet ?? [])
          .filter((x) => x.Ipv6CidrBlockState?.State === 'associated' && x.Ipv6CidrBlock)
          .map((x) => x.Ipv6CidrBlock!);
        out.push({
          subnetId: s.SubnetId,
          cidr: s.CidrBlock,
          availableIps: s.AvailableIpAddressCount ?? 0,
          vpcId: s.VpcId ?? '',
          availabilityZone: s.AvailabilityZone ?? '',
          tags,
          ...(ipv6Cidrs.length ? { ipv6Cidrs } : {}),
        });
      }
      NextToken = page.NextToken;
    } while (NextToken);
    return out;
  }

  /**
   * Creates an ENI with tags and `secondaryCount` secondary IPs, or (prefix delegation)
   * `prefixCount` /28 IPv4 prefixes (`Ipv4PrefixCount`; EC2 refuses both in one request);
   * returns it (status `available`).
   */
  async createEni(p: {
    subnetId: string;
    description: string;
    tags: Record<string, string>;
    secondaryCount: number;
    prefixCount?: number;
    securityGroupIds?: string[];
  }): Promise<Ec2Eni> {
    const out = await this.call('CreateNetworkInterface', (o) =>
      this.sdk((c, m) =>
        c.send(
          new m.CreateNetworkInterfaceCommand({
            SubnetId: p.subnetId,
            Description: p.description,
            ...(p.secondaryCount > 0 ? { SecondaryPrivateIpAddressCount: p.secondaryCount } : {}),
            ...((p.prefixCount ?? 0) > 0 ? { Ipv4PrefixCount: p.prefixCount } : {}),
            ...(p.securityGroupIds?.length ? { Groups: p.securityGroupIds } : {}),
            TagSpecifications: [
              {
                ResourceType: 'network-interface',
                Tags: Object.entries(p.tags).map(([Key, Value]) => ({ Key, Value })),
              },
            ],
          }),
          o,
        ),
      ),
    );
    if (!out.NetworkInterface?.NetworkInterfaceId)
      throw new Ec2Error('CreateNetworkInterface', 'IncompleteResponse', 'no NetworkInterfaceId');
    return normaliseEni(out.NetworkInterface);
  }

  /** Attaches an ENI at a device index; returns the attachment id. */
  async attachEni(eniId: string, instanceId: string, deviceIndex: number): Promise<string> {
    const out = await this.call('AttachNetworkInterface', (o) =>
      this.sdk((c, m) =>
        c.send(
          new m.AttachNetworkInterfaceCommand({
            NetworkInterfaceId: eniId,
            InstanceId: instanceId,
            DeviceIndex: deviceIndex,
          }),
          o,
        ),
      ),
    );
    if (!out.AttachmentId) throw new Ec2Error('AttachNetworkInterface', 'IncompleteResponse', 'no AttachmentId');
    return out.AttachmentId;
  }

  /** Sets DeleteOnTermination on an attachment, so terminating the instance frees the ENI. */
  async setDeleteOnTermination(eniId: string, attachmentId: string): Promise<void> {
    await this.call('ModifyNetworkInterfaceAttribute', (o) =>
      this.sdk((c, m) =>
        c.send(
          new m.ModifyNetworkInterfaceAttributeCommand({
            NetworkInterfaceId: eniId,
            Attachment: { AttachmentId: attachmentId, DeleteOnTermination: true },
          }),
          o,
        ),
      ),
    );
  }

  /** Assigns `count` secondary IPs to an ENI in one call; returns them. */
  async assignIps(eniId: string, count: number): Promise<string[]> {
    const out = await this.call('AssignPrivateIpAddresses', (o) =>
      this.sdk((c, m) =>
        c.send(
          new m.AssignPrivateIpAddressesCommand({ NetworkInterfaceId: eniId, SecondaryPrivateIpAddressCount: count }),
          o,
        ),
      ),
    );
    const ips = (out.AssignedPrivateIpAddresses ?? []).map((a) => a.PrivateIpAddress ?? '').filter(Boolean);
    return this.parsed(() => checkAll('ec2', 'AssignPrivateIpAddresses', 'PrivateIpAddress', 'ipv4', ips));
  }

  /**
   * Runs the checks of one answer: an AnswerParseError is reported to `onParseError` and
   * thrown as Ec2Error code `MalformedResponse` (not retried: the caller keeps its last
   * good view and tries again on its own schedule). @throws Ec2Error
   */
  private parsed<T>(build: () => T): T {
    try {
      return build();
    } catch (e) {
      if (!(e instanceof AnswerParseError)) throw e;
      this.o.onParseError?.(e);
      throw new Ec2Error(e.where, 'MalformedResponse', e.message);
    }
  }

  /** Unassigns secondary IPs from an ENI in one call. */
  async unassignIps(eniId: string, ips: string[]): Promise<void> {
    if (ips.length === 0) return;
    await this.call('UnassignPrivateIpAddresses', (o) =>
      this.sdk((c, m) =>
        c.send(new m.UnassignPrivateIpAddressesCommand({ NetworkInterfaceId: eniId, PrivateIpAddresses: ips }), o),
      ),
    );
  }

  /**
   * Prefix delegation: assigns `count` /28 IPv4 prefixes to an ENI in one
   * AssignPrivateIpAddresses call with `Ipv4PrefixCount` (AWS EC2 User Guide, "Assign
   * prefixes to network interfaces"; Nitro instance types only).
   * @returns the assigned prefixes (`a.b.c.d/28`). @throws Ec2Error
   */
  async assignPrefixes(eniId: string, count: number): Promise<string[]> {
    const out = await this.call('AssignPrivateIpAddresses', (o) =>
      this.sdk((c, m) =>
        c.send(new m.AssignPrivateIpAddressesCommand({ NetworkInterfaceId: eniId, Ipv4PrefixCount: count }), o),
      ),
    );
    return (out.AssignedIpv4Prefixes ?? []).map((a) => a.Ipv4Prefix ?? '').filter(Boolean);
  }

  /** Prefix delegation: unassigns /28 IPv4 prefixes from an ENI in one UnassignPrivateIpAddresses call (`Ipv4Prefix.N`). @throws Ec2Error */
  async unassignPrefixes(eniId: string, prefixes: string[]): Promise<void> {
    if (prefixes.length === 0) return;
    await this.call('UnassignPrivateIpAddresses', (o) =>
      this.sdk((c, m) =>
        c.send(new m.UnassignPrivateIpAddressesCommand({ NetworkInterfaceId: eniId, Ipv4Prefixes: prefixes }), o),
      ),
    );
  }

  /**
   * IPv6 prefix delegation: assigns `count` /80 IPv6 prefixes from the ENI's subnet's /64
   * in one AssignIpv6Addresses call with `Ipv6PrefixCount` (AWS EC2 API Reference,
   * "AssignIpv6Addresses"; AWS EC2 User Guide, "Assign prefixes to network interfaces";
   * Nitro instance types only). @returns the prefixes (`AssignedIpv6Prefixes`).
   * @throws Ec2Error (`MalformedResponse` when a prefix is not an IPv6 CIDR)
   */
  async assignIpv6Prefixes(eniId: string, count: number): Promise<string[]> {
    const out = await this.call('AssignIpv6Addresses', (o) =>
      this.sdk((c, m) =>
        c.send(new m.AssignIpv6AddressesCommand({ NetworkInterfaceId: eniId, Ipv6PrefixCount: count }), o),
      ),
    );
    const prefixes = (out.AssignedIpv6Prefixes ?? []).filter(Boolean);
    return this.parsed(() => checkAll('ec2', 'AssignIpv6Addresses', 'Ipv6Prefix', 'cidr6', prefixes));
  }

  /** Detaches an ENI (never forced: a forced detach can strand the OS's view, per the EC2 docs). */
  async detachEni(attachmentId: string): Promise<void> {
    await this.call('DetachNetworkInterface', (o) =>
      this.sdk((c, m) => c.send(new m.DetachNetworkInterfaceCommand({ AttachmentId: attachmentId, Force: false }), o)),
    );
  }

  /** Deletes an ENI; `InvalidNetworkInterfaceID.NotFound` counts as success (already gone). */
  async deleteEni(eniId: string): Promise<void> {
    try {
      await this.call('DeleteNetworkInterface', (o) =>
        this.sdk((c, m) => c.send(new m.DeleteNetworkInterfaceCommand({ NetworkInterfaceId: eniId }), o)),
      );
    } catch (e) {
      if (e instanceof Ec2Error && e.code === 'InvalidNetworkInterfaceID.NotFound') return;
      throw e;
    }
  }

  private async describeEnisWhere(
    input: { NetworkInterfaceIds?: string[]; Filters?: Filter[] },
    opts?: Ec2CallOptions,
  ): Promise<Ec2Eni[]> {
    const out: Ec2Eni[] = [];
    let NextToken: string | undefined;
    do {
      const page = await this.call(
        'DescribeNetworkInterfaces',
        (o) =>
          this.sdk((c, m) =>
            c.send(
              new m.DescribeNetworkInterfacesCommand({
                ...input,
                ...(NextToken ? { NextToken } : {}),
                ...(input.NetworkInterfaceIds ? {} : { MaxResults: 1000 }),
              }),
              o,
            ),
          ),
        opts,
      );
      for (const ni of page.NetworkInterfaces ?? []) out.push(this.parsed(() => normaliseEni(ni)));
      NextToken = page.NextToken;
    } while (NextToken);
    return out;
  }
}

/** Compile-time check that {@link Ec2Api} implements the {@link Ec2Port} (structurally). */
export const asEc2Port: (api: Ec2Api) => Ec2Port = (api) => api;
