/**
 * The node side of an instance's primary ENI once the VPC data plane (./dataplane.ts) has
 * plugged its link as `eth0`: the instance's primary addresses on it and the default route
 * through the subnet's VPC router, as on EC2 (AWS VPC User Guide, "Subnet CIDR blocks": the
 * router is the subnet's first host address; IPv6 leaves through `fe80::1`).
 */
import { run, type Netns } from '../netns.js';
import { VPC_ROUTER_V6 } from './dataplane.js';

/**
 * Puts `ipv4` (and `ipv6`, when given) on `eth0` of `ns` as a host address, brings it up and
 * routes the default through `gateway` (the subnet's VPC router) and, for IPv6, `fe80::1`.
 * @throws Error from `ip` (e.g. no `eth0` in `ns` yet, or the address is there already).
 */
export async function addressEth0(ns: Netns, ipv4: string, gateway: string, ipv6: string | undefined): Promise<void> {
  const ip = (...a: string[]): Promise<string> => run('ip', ['-n', ns.name, ...a]);
  await ip('addr', 'add', `${ipv4}/32`, 'dev', 'eth0');
  await ip('link', 'set', 'eth0', 'up');
  await ip('route', 'add', 'default', 'via', gateway, 'dev', 'eth0', 'onlink');
  if (ipv6) {
    await ip('-6', 'addr', 'add', `${ipv6}/128`, 'dev', 'eth0', 'nodad');
    await ip('-6', 'route', 'add', 'default', 'via', VPC_ROUTER_V6, 'dev', 'eth0');
  }
}
