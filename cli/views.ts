/**
 * Pure joins for `pods` and `enis`: pod ↔ IP ↔ ENI ↔ device number ↔ route table.
 * docs/design.md#7-host-networking: a secondary ENI with device number d routes from table d+1; the primary
 * ENI (device 0) uses the main table (254).
 */
import type { Allocation, IpamdStatus } from './ipamd-api.js';

/** Route table of an ENI's pods by device number: `main` for 0, else d+1. */
export function routeTable(deviceNumber: number | undefined): string {
  if (deviceNumber === undefined) return '?';
  return deviceNumber === 0 ? 'main' : String(deviceNumber + 1);
}

/** One pod row. */
export interface PodRow {
  namespace: string;
  pod: string;
  ip: string;
  eniId: string;
  deviceNumber: number | null;
  routeTable: string;
  containerID: string;
  ifName: string;
  networkName: string;
  allocatedAt: string;
}

/** Joins allocations with the ENIs of `/v1/status`; sorted by namespace, pod, IP. */
export function podRows(st: IpamdStatus, allocs: Allocation[]): PodRow[] {
  const dev = new Map(st.enis.map((e) => [e.eniId, e.deviceNumber]));
  return allocs
    .map((a) => {
      const d = dev.get(a.eniId);
      const t = typeof a.allocatedAt === 'number' ? new Date(a.allocatedAt).toISOString() : String(a.allocatedAt);
      return {
        namespace: a.pod?.namespace ?? '',
        pod: a.pod?.name ?? '',
        ip: a.ipv4,
        eniId: a.eniId,
        deviceNumber: d ?? null,
        routeTable: routeTable(d),
        containerID: a.containerID,
        ifName: a.ifName,
        networkName: a.networkName,
        allocatedAt: t,
      };
    })
    .sort(
      (x, y) =>
        x.namespace.localeCompare(y.namespace) ||
        x.pod.localeCompare(y.pod) ||
        x.ip.localeCompare(y.ip, undefined, { numeric: true }),
    );
}

/** One ENI row. */
export interface EniRow {
  eniId: string;
  deviceNumber: number;
  primary: boolean;
  routeTable: string;
  capacity: number;
  total: number;
  assigned: number;
  cooling: number;
  available: number;
  prefixes?: number;
  /** `namespace/name ip` of each pod on the ENI. */
  pods: string[];
}

/** ENIs by device number with their pods. */
export function eniRows(st: IpamdStatus, allocs: Allocation[]): EniRow[] {
  return [...st.enis]
    .sort((a, b) => a.deviceNumber - b.deviceNumber)
    .map((e) => ({
      eniId: e.eniId,
      deviceNumber: e.deviceNumber,
      primary: e.isPrimary,
      routeTable: routeTable(e.deviceNumber),
      capacity: e.capacity,
      total: e.total,
      assigned: e.assigned,
      cooling: e.cooling,
      available: Math.max(e.total - e.assigned - e.cooling, 0),
      ...(e.prefixes !== undefined ? { prefixes: e.prefixes } : {}),
      pods: allocs
        .filter((a) => a.eniId === e.eniId)
        .map((a) => `${a.pod ? `${a.pod.namespace}/${a.pod.name}` : a.containerID.slice(0, 12)} ${a.ipv4}`),
    }));
}

/** The warm-pool settings in their env var names, e.g. `WARM_IP_TARGET=4 MAX_ENI=3`. */
export function targetsLine(st: IpamdStatus): string {
  const t = st.targets;
  const parts = [`WARM_ENI_TARGET=${t.warmEniTarget}`];
  if (t.warmIpTarget !== undefined) parts.push(`WARM_IP_TARGET=${t.warmIpTarget}`);
  if (t.minimumIpTarget !== undefined) parts.push(`MINIMUM_IP_TARGET=${t.minimumIpTarget}`);
  if (t.warmPrefixTarget !== undefined) parts.push(`WARM_PREFIX_TARGET=${t.warmPrefixTarget}`);
  parts.push(`max ENIs=${t.maxEni}`, `unit=${t.unit ?? 'ip'}`);
  return parts.join(' ');
}
