/**
 * Types of the in-memory datastore: ENIs, their secondary IPv4 addresses, and the
 * allocations that hold them. Pure data; no I/O.
 */

/** Identity of one CNI attachment (docs/design.md#3-contracts): never the pod name. */
export interface AllocationKey {
  networkName: string;
  containerID: string;
  ifName: string;
}

/** The Kubernetes pod an allocation belongs to, as the runtime reported it. */
export interface PodRef {
  namespace: string;
  name: string;
  uid: string;
}

/** One address held by one attachment. `allocatedAt` is ms since the epoch. */
export interface Allocation extends AllocationKey {
  ipv4: string;
  eniId: string;
  allocatedAt: number;
  pod?: PodRef;
}

/** What the datastore knows of an ENI that is part of the warm pool. */
export interface EniInfo {
  eniId: string;
  /** MAC address, lower case, colon separated. */
  mac: string;
  /** Attachment device index (0 for the primary ENI). */
  deviceNumber: number;
  subnetId: string;
  /** IPv4 CIDR of the ENI's subnet. */
  subnetCidr: string;
  /** The ENI's own primary private IPv4 (never handed to pods). */
  primaryIp: string;
  /** True for the instance's primary ENI (device 0): never detached or deleted. */
  isPrimary: boolean;
  /** When the ENI was created (ms since epoch); for the primary ENI, when it was seen first. */
  createdAtMs: number;
  /** Secondary IPv4 addresses this ENI may hold (Ipv4AddressesPerInterface − 1). */
  capacity: number;
}

/** State of one secondary IP as seen by the pool. */
export type IpState = 'available' | 'assigned' | 'cooling' | 'releasing' | 'unverified';

/** Aggregate counts at one instant. `available = total − assigned − cooling − releasing − unverified`. */
export interface DatastoreCounts {
  total: number;
  assigned: number;
  cooling: number;
  releasing: number;
  unverified: number;
  available: number;
  enis: number;
}
