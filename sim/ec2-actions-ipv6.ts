/**
 * The EC2 Query API's IPv6 assignment actions (AWS EC2 API Reference, "AssignIpv6Addresses"
 * and "UnassignIpv6Addresses"). Request parameters as the EC2 service model serialises
 * them: `NetworkInterfaceId`, `Ipv6AddressCount`, `Ipv6Addresses.N`, `Ipv6PrefixCount`,
 * `Ipv6Prefix.N`; answers `assignedIpv6Addresses` / `assignedIpv6PrefixSet` and
 * `unassignedIpv6Addresses` / `unassignedIpv6PrefixSet`, lists of `<item>` strings.
 */
import type { CloudModel } from './cloud-model.js';
import { set, type XmlTree } from './ec2-xml.js';
import { assignIpv6, unassignIpv6 } from './ipv6-assignment.js';
import { list, optInt, reqString, type QueryParams } from './query-params.js';

/** One action handler (the shape of `ec2-actions.ts`'s, declared here so neither imports the other's module). */
type ActionHandler = (model: CloudModel, p: QueryParams) => XmlTree;

/** AssignIpv6Addresses: IPv6 addresses or /80 prefixes to an ENI, from its subnet's /64. */
export const assignIpv6Addresses: ActionHandler = (model, p) => {
  const eniId = reqString(p, 'NetworkInterfaceId');
  const addressCount = optInt(p, 'Ipv6AddressCount', 0, 1000);
  const prefixCount = optInt(p, 'Ipv6PrefixCount', 0, 1000);
  const r = assignIpv6(model, eniId, {
    ...(addressCount !== undefined ? { addressCount } : {}),
    addresses: list(p, 'Ipv6Addresses'),
    ...(prefixCount !== undefined ? { prefixCount } : {}),
    prefixes: list(p, 'Ipv6Prefix'),
  });
  return {
    networkInterfaceId: eniId,
    assignedIpv6Addresses: set(r.addresses),
    assignedIpv6PrefixSet: set(r.prefixes),
  };
};

/** UnassignIpv6Addresses: IPv6 addresses and/or /80 prefixes back to the subnet. */
export const unassignIpv6Addresses: ActionHandler = (model, p) => {
  const eniId = reqString(p, 'NetworkInterfaceId');
  const r = unassignIpv6(model, eniId, list(p, 'Ipv6Addresses'), list(p, 'Ipv6Prefix'));
  return {
    networkInterfaceId: eniId,
    unassignedIpv6Addresses: set(r.addresses),
    unassignedIpv6PrefixSet: set(r.prefixes),
  };
};
