/**
 * `enis -o wide`: one row per address instead of one per ENI. From ipamd's `/v1/enis`
 * (amazon-vpc-cni-k8s's shape, ipamd/observability/introspect-enis.ts) when it is up, from
 * EC2's secondary IPs and prefixes joined with the checkpoint's allocations when it is
 * down. A /28 prefix is one row of its own (its free addresses are not listed one by one,
 * as upstream does). Pure, sorted by device number then address.
 */
import { orderBy } from 'natural-orderby';
import type { Ec2Eni } from '../ipamd/cloud/ec2.js';
import type { Allocation } from './ipamd-api.js';
import { routeTable } from './views.js';

/** One address (or one prefix) of an ENI. */
export interface AddressRow {
  eniId: string;
  deviceNumber: number | null;
  routeTable: string;
  /** `a.b.c.d` or, for a prefix's own row, `a.b.c.d/28`. */
  address: string;
  /** `assigned`, `cooling` (released, in IP_COOLDOWN_PERIOD), `free`, or `prefix`. */
  state: 'assigned' | 'cooling' | 'free' | 'prefix';
  /** `namespace/name` of the pod holding it, else ''. */
  pod: string;
}

interface UpstreamAddress {
  Address: string;
  IPAMMetadata?: { k8sPodNamespace?: string; k8sPodName?: string };
  AssignedTime?: string;
  UnassignedTime?: string;
}
interface UpstreamCidr {
  IsPrefix?: boolean;
  IPAddresses?: Record<string, UpstreamAddress>;
}
interface UpstreamEni {
  ID: string;
  DeviceNumber: number;
  AvailableIPv4Cidrs?: Record<string, UpstreamCidr>;
}

const ZERO = '0001-01-01T00:00:00Z';

const sorted = (rows: AddressRow[]): AddressRow[] =>
  orderBy(rows, [(r) => r.deviceNumber ?? 999, (r) => r.eniId, (r) => r.address]);

/** Rows from `/v1/enis` (`{ "<card>": { ENIs: { id: … } } }`). */
export function addressRowsFromIntrospection(
  doc: Record<string, { ENIs?: Record<string, UpstreamEni> }>,
): AddressRow[] {
  const rows: AddressRow[] = [];
  for (const card of Object.values(doc)) {
    for (const e of Object.values(card.ENIs ?? {})) {
      const base = { eniId: e.ID, deviceNumber: e.DeviceNumber, routeTable: routeTable(e.DeviceNumber) };
      for (const [cidr, c] of Object.entries(e.AvailableIPv4Cidrs ?? {})) {
        if (c.IsPrefix) rows.push({ ...base, address: cidr, state: 'prefix', pod: '' });
        for (const a of Object.values(c.IPAddresses ?? {})) {
          const m = a.IPAMMetadata ?? {};
          const assigned = !!a.AssignedTime && a.AssignedTime !== ZERO;
          const cooling = !assigned && !!a.UnassignedTime && a.UnassignedTime !== ZERO;
          rows.push({
            ...base,
            address: a.Address,
            state: assigned ? 'assigned' : cooling ? 'cooling' : 'free',
            pod: m.k8sPodName ? `${m.k8sPodNamespace ?? ''}/${m.k8sPodName}` : '',
          });
        }
      }
    }
  }
  return sorted(rows);
}

/** Rows from EC2's ENIs and the checkpoint's allocations (ipamd down: no cooling state is known). */
export function addressRowsFromEc2(enis: Ec2Eni[], allocs: Allocation[]): AddressRow[] {
  const byIp = new Map(allocs.map((a) => [a.ipv4, a]));
  const rows: AddressRow[] = [];
  for (const e of enis) {
    const dev = e.attachment?.deviceIndex ?? null;
    const base = { eniId: e.eniId, deviceNumber: dev, routeTable: routeTable(dev ?? undefined) };
    for (const p of e.ipv4Prefixes) rows.push({ ...base, address: p, state: 'prefix', pod: '' });
    const inPrefixes = allocs.filter((a) => a.eniId === e.eniId && !e.secondaryIps.includes(a.ipv4));
    for (const ip of [...e.secondaryIps, ...inPrefixes.map((a) => a.ipv4)]) {
      const a = byIp.get(ip);
      rows.push({
        ...base,
        address: ip,
        state: a ? 'assigned' : 'free',
        pod: a?.pod ? `${a.pod.namespace}/${a.pod.name}` : '',
      });
    }
  }
  return sorted(rows);
}
