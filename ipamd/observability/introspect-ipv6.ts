/**
 * The `IPv6Cidrs` of the primary ENI in `/v1/enis` (introspect-enis.ts) on a node serving
 * IPv6: the /80 in the shape amazon-vpc-cni-k8s's introspection gives it (its datastore's
 * `CidrInfo`: `{"Cidr":{"IP","Mask"},"IPAddresses":{…},"IsPrefix":true,"AddressFamily":"6"}`,
 * the mask as Go marshals a 16-byte `net.IPMask`, base64). Listed addresses: those held and
 * those cooling, as upstream lists a prefix's addresses once handed out; container id and
 * interface name blanked. Pure.
 */
import { wallOf } from '../clock.js';
import type { V6State } from '../datastore/ipv6-allocations.js';
import { GO_ZERO_TIME } from './introspect-enis.js';

/** Base64 of a 16-byte IPv6 mask of `bits` ones. */
function mask6Base64(bits: number): string {
  const b = Buffer.alloc(16);
  for (let i = 0; i < 16; i++)
    b[i] = bits >= (i + 1) * 8 ? 0xff : bits > i * 8 ? (0xff << (8 - (bits - i * 8))) & 0xff : 0;
  return b.toString('base64');
}

/**
 * The `IPv6Cidrs` object of the ENI holding `s.prefix`. `releasedAt` of cooling entries
 * is on the monotonic clock (converted to wall time).
 */
export function ipv6CidrsDocument(s: Pick<V6State, 'prefix' | 'allocations' | 'cooling'>): Record<string, unknown> {
  const [base, bits] = s.prefix.split('/') as [string, string];
  const iso = (ms: number) => new Date(ms).toISOString();
  const addrs: Record<string, unknown> = {};
  for (const a of s.allocations)
    addrs[a.ipv6] = {
      Address: a.ipv6,
      IPAMKey: { networkName: a.networkName, containerID: '', ifName: '' },
      IPAMMetadata: a.pod ? { k8sPodNamespace: a.pod.namespace, k8sPodName: a.pod.name } : {},
      AssignedTime: iso(wallOf(a.allocatedAt)),
      UnassignedTime: GO_ZERO_TIME,
    };
  for (const c of s.cooling)
    if (c.address.includes(':') && !addrs[c.address])
      addrs[c.address] = {
        Address: c.address,
        IPAMKey: { networkName: '', containerID: '', ifName: '' },
        IPAMMetadata: {},
        AssignedTime: GO_ZERO_TIME,
        UnassignedTime: iso(wallOf(c.releasedAt)),
      };
  return {
    [s.prefix]: {
      Cidr: { IP: base, Mask: mask6Base64(Number(bits)) },
      IPAddresses: addrs,
      IsPrefix: true,
      AddressFamily: '6',
    },
  };
}
