/**
 * What the simulated VPC's data plane must be, computed from EC2's state alone (pure): one
 * link per ENI attached to an instance that has a node namespace, and one route per address
 * EC2 says an attached ENI holds, to that ENI's link. Nothing else is routed: an address no
 * ENI holds, or one held by an ENI that is detached or attaching, has no route, so a packet
 * to it is dropped (a stale assignment blackholes, as in a VPC, instead of reaching whichever
 * instance held it last).
 *
 * Sources: AWS VPC User Guide ("How Amazon VPC works": the VPC router delivers to the network
 * interface that holds the destination address; "Source/destination checking": an interface
 * with the check on drops traffic whose source it does not hold), and EC2's model of secondary
 * IPv4 addresses, /28 prefixes (`Ipv4Prefixes`), IPv6 addresses and /80 prefixes on an ENI.
 */
import type { Eni, SimState } from '../../sim/index.js';

/** One ENI link of the data plane: the far end of an instance's `eth<device>` in the VPC namespace. */
export interface DesiredLink {
  eniId: string;
  instanceId: string;
  /** The instance's device index for it (`eth<deviceIndex>` in the node namespace). */
  deviceIndex: number;
  /** The ENI's MAC (the node end carries it, and the VPC delivers frames to it). */
  mac: string;
  /** Link name in the VPC namespace: `i<instance slot>e<device index>` (≤ 15 bytes). */
  vpcName: string;
  /** Whether packets from an address the ENI does not hold are dropped (EC2 `SourceDestCheck`). */
  sourceDestCheck: boolean;
}

/** The data plane EC2's state asks for. */
export interface DesiredPlane {
  /** By ENI id. */
  links: Map<string, DesiredLink>;
  /** IPv4 destination (`a.b.c.d/32` or a `/28` prefix) → the ENI id holding it. */
  routes4: Map<string, string>;
  /** IPv6 destination (`…/128` or a `/80` prefix) → the ENI id holding it. */
  routes6: Map<string, string>;
  /** The VPC router's address in each subnet with a plugged ENI (its first host address). */
  gateways: string[];
}

/** The IPv4 addresses and prefixes EC2 says `eni` holds, as routes. */
export function eniRoutes4(eni: Pick<Eni, 'primaryIp' | 'secondaryIps' | 'ipv4Prefixes'>): string[] {
  return [eni.primaryIp, ...eni.secondaryIps].map((a) => `${a}/32`).concat(eni.ipv4Prefixes);
}

/** The IPv6 addresses and prefixes EC2 says `eni` holds, as routes (compressed form, as `ip` prints them). */
export function eniRoutes6(eni: Pick<Eni, 'ipv6Addresses' | 'ipv6Prefixes'>): string[] {
  return eni.ipv6Addresses.map((a) => `${a}/128`).concat(eni.ipv6Prefixes);
}

/** The first host address of IPv4 `cidr` (the VPC router's address in a subnet). */
export function firstHost(cidr: string): string {
  const [net, len] = cidr.split('/') as [string, string];
  const n = net.split('.').reduce((a, o) => a * 256 + Number(o), 0);
  const mask = Number(len) === 0 ? 0 : 2 ** 32 - 2 ** (32 - Number(len));
  const h = ((n & mask) >>> 0) + 1;
  return [24, 16, 8, 0].map((s) => (h >>> s) & 255).join('.');
}

/**
 * The data plane for `state` when the instances in `slots` (instance id → a small number
 * naming its links) have node namespaces. Only ENIs whose attachment is `attached` count.
 */
export function desiredPlane(
  state: Pick<SimState, 'enis' | 'subnets'>,
  slots: ReadonlyMap<string, number>,
): DesiredPlane {
  const links = new Map<string, DesiredLink>();
  const routes4 = new Map<string, string>();
  const routes6 = new Map<string, string>();
  const subnets = new Set<string>();
  for (const eni of state.enis.values()) {
    const a = eni.attachment;
    const slot = a ? slots.get(a.instanceId) : undefined;
    if (!a || slot === undefined || a.status !== 'attached') continue;
    links.set(eni.networkInterfaceId, {
      eniId: eni.networkInterfaceId,
      instanceId: a.instanceId,
      deviceIndex: a.deviceIndex,
      mac: eni.macAddress,
      vpcName: `i${slot}e${a.deviceIndex}`,
      sourceDestCheck: eni.sourceDestCheck,
    });
    for (const r of eniRoutes4(eni)) routes4.set(r, eni.networkInterfaceId);
    for (const r of eniRoutes6(eni)) routes6.set(r, eni.networkInterfaceId);
    subnets.add(eni.subnetId);
  }
  const gateways = [...subnets]
    .map((id) => state.subnets.get(id)?.cidr)
    .filter((c): c is string => !!c)
    .map(firstHost)
    .sort();
  return { links, routes4, routes6, gateways };
}
