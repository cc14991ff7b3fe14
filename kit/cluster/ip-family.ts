/**
 * The test cluster's IP family (Kubernetes "IPv4/IPv6 dual-stack" docs): which addresses
 * the node reports, which Service ranges the apiserver allocates from and where the
 * control plane listens. Pure.
 *
 * - `ipv4`: the node's primary private IPv4, Services from 10.96.0.0/16 (as before);
 * - `ipv6`: the primary ENI's IPv6 (an EKS IPv6 cluster), Services from fd00:10:96::/112;
 * - `dual`: both, IPv4 first (the primary family), both Service ranges.
 */

/** A cluster's IP family. */
export type ClusterIpFamily = 'ipv4' | 'ipv6' | 'dual';

/** The IPv4 Service CIDR; its first address is the `kubernetes` Service. */
export const SERVICE_CIDR_V4 = '10.96.0.0/16';
/** The IPv6 Service CIDR (a /112: within what the apiserver accepts for IPv6 ranges). */
export const SERVICE_CIDR_V6 = 'fd00:10:96::/112';

/** What {@link familyPlan} decided. */
export interface FamilyPlan {
  family: ClusterIpFamily;
  /** The node's addresses as kubelet `--node-ip` takes them, primary family first. */
  nodeIps: string[];
  /** `--service-cluster-ip-range` entries, primary family first. */
  serviceCidrs: string[];
  /** The `kubernetes` Service's address in each range (the first host), primary first. */
  serviceIps: string[];
  /**
   * The cluster DNS Service's address (kubelet `clusterDNS`, the `kube-dns` Service): the
   * tenth address of the primary range, as kubeadm's GetDNSIP picks it.
   */
  dnsIp: string;
  /** The wildcard the apiserver and kube-proxy bind: `::` (both families) unless IPv4 only. */
  bindAddress: '0.0.0.0' | '::';
}

/**
 * The plan for `family` on a node with primary IPv4 `nodeIp` and IPv6 `nodeIpv6`.
 * @throws Error when the family needs an IPv6 address and the node has none.
 */
export function familyPlan(family: ClusterIpFamily, nodeIp: string, nodeIpv6?: string): FamilyPlan {
  if (family !== 'ipv4' && !nodeIpv6)
    throw new Error(`a ${family} cluster needs the node's IPv6 address (a dual-stack subnet)`);
  const v4 = { ip: nodeIp, cidr: SERVICE_CIDR_V4, svc: '10.96.0.1', dns: '10.96.0.10' };
  const v6 = { ip: nodeIpv6!, cidr: SERVICE_CIDR_V6, svc: 'fd00:10:96::1', dns: 'fd00:10:96::a' };
  const order = family === 'ipv4' ? [v4] : family === 'ipv6' ? [v6] : [v4, v6];
  return {
    family,
    nodeIps: order.map((x) => x.ip),
    serviceCidrs: order.map((x) => x.cidr),
    serviceIps: order.map((x) => x.svc),
    dnsIp: order[0]!.dns,
    bindAddress: family === 'ipv4' ? '0.0.0.0' : '::',
  };
}
