/**
 * The JSON of `GET /v1/enis`, in the shape amazon-vpc-cni-k8s's introspection serves
 * (its datastore's `ENIInfos` per network card, marshalled by Go's encoding/json), so
 * scripts written for aws-node read it unchanged:
 *
 *   { "0": { "TotalIPs": n, "AssignedIPs": n, "ENIs": { "<eni-id>": {
 *       "ID", "IsPrimary", "IsTrunk": false, "IsEFA": false, "DeviceNumber",
 *       "AvailableIPv4Cidrs": { "<ip>/32" | "<prefix>/28": {
 *           "Cidr": { "IP": "a.b.c.d", "Mask": "<base64 of the 4 mask bytes>" },
 *           "IPAddresses": { "<ip>": { "Address", "IPAMKey": { networkName, containerID: "", ifName: "" },
 *                                      "IPAMMetadata": { k8sPodNamespace?, k8sPodName? },
 *                                      "AssignedTime", "UnassignedTime" } },
 *           "IsPrefix", "AddressFamily": "4" } },
 *       "IPv6Cidrs": {} | the /80 on the primary ENI (introspect-ipv6.ts), "IsExcludedForPodIPs": false, "RouteTableID", "SubnetID" } } } }
 *
 * As upstream does, the container id and interface name are blanked (they are what a
 * forged DelNetwork needs); times are RFC 3339, Go's zero time "0001-01-01T00:00:00Z"
 * when unset. One network card ("0"): ipamd manages card 0 only. Pure: reads in, JSON out.
 */
import { wallOf } from '../clock.js';
import type { Allocation, EniInfo } from '../datastore/types.js';

/** Go's zero `time.Time`, as encoding/json writes it. */
export const GO_ZERO_TIME = '0001-01-01T00:00:00Z';

/** What {@link enisDocument} reads (the Datastore satisfies it). */
export interface EnisSource {
  listEnis(): EniInfo[];
  eniIps(eniId: string): string[];
  eniPrefixes(eniId: string): string[];
  prefixOf(ip: string): string | undefined;
  allocations(): Allocation[];
  coolingEntries(now: number): Array<{ ip: string; releasedAt: number }>;
}

/** Base64 of an IPv4 mask of `bits` ones (Go marshals `net.IPMask`, a byte slice, as base64). */
function maskBase64(bits: number): string {
  const m = bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0;
  return Buffer.from([m >>> 24, (m >>> 16) & 255, (m >>> 8) & 255, m & 255]).toString('base64');
}

/**
 * Builds the `/v1/enis` document. @param routeTableFor route table id of an ENI (254 main
 * for the primary); @param now clock (ms) for the cooldown state; @param ipv6Cidrs on a
 * node serving IPv6, the primary ENI's `IPv6Cidrs` (introspect-ipv6.ts).
 */
export function enisDocument(
  ds: EnisSource,
  routeTableFor: (eni: EniInfo) => number,
  now: number,
  ipv6Cidrs?: Record<string, unknown>,
): Record<string, unknown> {
  const byIp = new Map(ds.allocations().map((a) => [a.ipv4, a]));
  const released = new Map(ds.coolingEntries(now).map((c) => [c.ip, c.releasedAt]));
  const iso = (ms: number | undefined) => (ms === undefined ? GO_ZERO_TIME : new Date(wallOf(ms)).toISOString());
  const address = (ip: string) => {
    const a = byIp.get(ip);
    return {
      Address: ip,
      IPAMKey: { networkName: a?.networkName ?? '', containerID: '', ifName: '' },
      IPAMMetadata: a?.pod ? { k8sPodNamespace: a.pod.namespace, k8sPodName: a.pod.name } : {},
      AssignedTime: iso(a?.allocatedAt),
      UnassignedTime: iso(a ? undefined : released.get(ip)),
    };
  };
  const ENIs: Record<string, unknown> = {};
  let total = 0;
  for (const eni of ds.listEnis()) {
    const cidrs: Record<string, unknown> = {};
    const prefixAddrs = new Map<string, Record<string, unknown>>(ds.eniPrefixes(eni.eniId).map((p) => [p, {}]));
    for (const ip of ds.eniIps(eni.eniId)) {
      total++;
      const p = ds.prefixOf(ip);
      if (p !== undefined) {
        const m = prefixAddrs.get(p) ?? {};
        // Upstream lists a prefix's addresses once they have been handed out.
        if (byIp.has(ip) || released.has(ip)) m[ip] = address(ip);
        prefixAddrs.set(p, m);
      } else {
        cidrs[`${ip}/32`] = {
          Cidr: { IP: ip, Mask: maskBase64(32) },
          IPAddresses: { [ip]: address(ip) },
          IsPrefix: false,
          AddressFamily: '4',
        };
      }
    }
    for (const [p, addrs] of prefixAddrs) {
      const [base, bits] = p.split('/');
      cidrs[p] = {
        Cidr: { IP: base, Mask: maskBase64(Number(bits)) },
        IPAddresses: addrs,
        IsPrefix: true,
        AddressFamily: '4',
      };
    }
    ENIs[eni.eniId] = {
      ID: eni.eniId,
      IsPrimary: eni.isPrimary,
      IsTrunk: false,
      IsEFA: false,
      DeviceNumber: eni.deviceNumber,
      AvailableIPv4Cidrs: cidrs,
      IPv6Cidrs: (eni.isPrimary && ipv6Cidrs) || {},
      IsExcludedForPodIPs: false,
      RouteTableID: routeTableFor(eni),
      SubnetID: eni.subnetId,
    };
  }
  return { 0: { TotalIPs: total, AssignedIPs: byIp.size, ENIs } };
}
