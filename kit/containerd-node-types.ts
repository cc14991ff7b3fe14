/**
 * Shapes the containerd node harness (containerd-node.ts) reads from ipamd's
 * introspection and hands to tests.
 */

/** The parts of ipamd's `GET /v1/status` these tests read. */
export interface IpamdStatus {
  counts: {
    total: number;
    assigned: number;
    cooling: number;
    releasing: number;
    unverified: number;
    available: number;
    enis: number;
  };
  releasesFrozen: boolean;
  freezeReasons: string[];
  enis: Array<{ eniId: string; deviceNumber: number; total: number; assigned: number }>;
  evidence: {
    criEndpoint: string;
    kubernetes: boolean;
    passes: number;
    lastPassAt: number | null;
    lastPass: {
      criOk: boolean;
      kubeOk: boolean | 'absent';
      adopted: number;
      released: number;
      live: number;
      canRelease: boolean;
    } | null;
  };
}

/** One allocation as `GET /v1/allocations` shows it. */
export interface IpamdAllocation {
  networkName: string;
  containerID: string;
  ifName: string;
  ipv4: string;
  eniId: string;
  allocatedAt: number;
  pod?: { namespace: string; name: string; uid: string };
}

/** A pod the harness ran: sandbox id, pod identity and the IP it got. */
export interface RunningPod {
  id: string;
  ip: string;
  name: string;
  namespace: string;
  uid: string;
}
