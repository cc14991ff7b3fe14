/**
 * The ENI and allocation key datastore unit tests build their stores from: an ENI record
 * in subnet 10.0.0.0/24 (`eni-0` is the primary), and an allocation key of network
 * `aws-cni`, interface `eth0`.
 */
import type { AllocationKey, EniInfo } from '../../ipamd/datastore/types.js';

/** ENI `id` at device number `dev` (0: the primary), holding up to `capacity` addresses. */
export function eniInfo(id: string, dev: number, capacity = 9): EniInfo {
  return {
    eniId: id,
    mac: `02:00:00:00:00:0${dev}`,
    deviceNumber: dev,
    subnetId: 'subnet-1',
    subnetCidr: '10.0.0.0/24',
    primaryIp: `10.0.0.${10 + dev}`,
    isPrimary: dev === 0,
    createdAtMs: 0,
    capacity,
  };
}

/** The allocation key of container `c` on `eth0` of network `aws-cni`. */
export function allocKey(c: string, ifName = 'eth0'): AllocationKey {
  return { networkName: 'aws-cni', containerID: c, ifName };
}
