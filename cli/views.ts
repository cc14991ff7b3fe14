/**
 * Pure joins for `pods` and `enis`: pod ↔ IP ↔ ENI ↔ device number ↔ route table.
 * docs/design.md#7-host-networking: a secondary ENI with device number d routes from table d+1; the primary
 * ENI (device 0) uses the main table (254).
 */
import { orderBy } from 'natural-orderby';
import { podRouteTable, tableName } from '../netfacts/routing.js';
import { CliError, EXIT } from './errors.js';
import type { Allocation, IpamdStatus } from './ipamd-api.js';

/** Route table of an ENI's pods by device number: `main` for 0, else d+1. */
export function routeTable(deviceNumber: number | undefined): string {
  if (deviceNumber === undefined) return '?';
  return tableName(podRouteTable({ deviceNumber }));
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

/**
 * Joins allocations with their ENIs' device numbers (`/v1/status`'s ENIs, or EC2's
 * attachments when ipamd is down); sorted naturally by namespace, pod, IP (web-2 before web-10).
 */
export function podRows(devices: ReadonlyMap<string, number>, allocs: Allocation[]): PodRow[] {
  const rows = allocs.map((a) => {
    const d = devices.get(a.eniId);
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
  });
  return orderBy(rows, [(r) => r.namespace, (r) => r.pod, (r) => r.ip]);
}

/** Device numbers by ENI id from `/v1/status`. */
export function statusDevices(st: IpamdStatus): Map<string, number> {
  return new Map(st.enis.map((e) => [e.eniId, e.deviceNumber]));
}

/** A `pods` filter: `NAMESPACE/NAME`, `NAMESPACE/` (the whole namespace) or `NAME` (any namespace); `*` matches any run of characters. */
export interface PodFilter {
  namespace?: RegExp;
  name?: RegExp;
}

const glob = (s: string): RegExp => new RegExp(`^${s.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*')}$`);

/**
 * Parses a `pods` filter (see {@link PodFilter}).
 * @throws CliError (usage) for more than one `/`, an empty name with no namespace, or characters no pod name has.
 */
export function parsePodFilter(spec: string): PodFilter {
  const parts = spec.split('/');
  if (parts.length > 2 || spec === '/' || spec === '' || !/^[a-z0-9.*/-]+$/i.test(spec))
    throw new CliError(
      `pod filter "${spec}" is invalid: expected NAMESPACE/NAME, NAMESPACE/ or NAME (letters, digits, '.', '-', '*' as a wildcard)`,
      EXIT.usage,
    );
  if (parts.length === 1) return { name: glob(parts[0]!) };
  return { namespace: glob(parts[0]!), ...(parts[1] ? { name: glob(parts[1]) } : {}) };
}

/** The rows `f` keeps. */
export function filterPods(rows: PodRow[], f: PodFilter | undefined): PodRow[] {
  if (!f) return rows;
  return rows.filter((r) => (!f.namespace || f.namespace.test(r.namespace)) && (!f.name || f.name.test(r.pod)));
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
