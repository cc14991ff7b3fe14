/** Mapping of the AWS SDK's EC2 shapes to ipamd's normalised ones. */
import type { NetworkInterface } from '@aws-sdk/client-ec2';
import type { Ec2Eni } from './ec2-port.js';
import { checkAll, checkOne } from './answer-parse.js';

/**
 * Converts the SDK's NetworkInterface to {@link Ec2Eni}; `action` names the call for errors.
 * The IPv6 lists are set only when non-empty.
 * @throws AnswerParseError when an address (`PrivateIpAddress`, `Ipv6Address`) or a prefix
 *   (`Ipv4Prefix`, `Ipv6Prefix`) is not one: the whole answer is refused (docs/design.md#bounds-on-bad-input).
 */
export function normaliseEni(ni: NetworkInterface, action = 'DescribeNetworkInterfaces'): Ec2Eni {
  const primary = ni.PrivateIpAddress ?? ni.PrivateIpAddresses?.find((p) => p.Primary)?.PrivateIpAddress ?? '';
  if (primary) checkOne('ec2', action, 'PrivateIpAddress', 'ipv4', primary);
  checkAll(
    'ec2',
    action,
    'PrivateIpAddress',
    'ipv4',
    (ni.PrivateIpAddresses ?? []).map((p) => p.PrivateIpAddress ?? '').filter(Boolean),
  );
  checkAll('ec2', action, 'Ipv4Prefix', 'cidr', (ni.Ipv4Prefixes ?? []).map((p) => p.Ipv4Prefix ?? '').filter(Boolean));
  const ipv6Addresses = (ni.Ipv6Addresses ?? []).map((x) => x.Ipv6Address ?? '').filter(Boolean);
  const ipv6Prefixes = (ni.Ipv6Prefixes ?? []).map((x) => x.Ipv6Prefix ?? '').filter(Boolean);
  checkAll('ec2', action, 'Ipv6Address', 'ipv6', ipv6Addresses);
  checkAll('ec2', action, 'Ipv6Prefix', 'cidr6', ipv6Prefixes);
  const a = ni.Attachment;
  return {
    eniId: ni.NetworkInterfaceId ?? '',
    mac: (ni.MacAddress ?? '').toLowerCase(),
    status: ni.Status ?? '',
    subnetId: ni.SubnetId ?? '',
    vpcId: ni.VpcId ?? '',
    description: ni.Description ?? '',
    primaryIp: primary,
    secondaryIps: (ni.PrivateIpAddresses ?? [])
      .filter((p) => !p.Primary && p.PrivateIpAddress)
      .map((p) => p.PrivateIpAddress!),
    ipv4Prefixes: (ni.Ipv4Prefixes ?? []).map((p) => p.Ipv4Prefix ?? '').filter(Boolean),
    ...(ipv6Addresses.length ? { ipv6Addresses } : {}),
    ...(ipv6Prefixes.length ? { ipv6Prefixes } : {}),
    ...(a?.AttachmentId
      ? {
          attachment: {
            attachmentId: a.AttachmentId,
            instanceId: a.InstanceId ?? '',
            deviceIndex: a.DeviceIndex ?? -1,
            status: a.Status ?? '',
            deleteOnTermination: a.DeleteOnTermination ?? false,
          },
        }
      : {}),
    tags: Object.fromEntries((ni.TagSet ?? []).map((t) => [t.Key ?? '', t.Value ?? ''])),
    securityGroupIds: (ni.Groups ?? []).map((g) => g.GroupId ?? '').filter(Boolean),
  };
}
