/**
 * The messages between the fleet bench (bench/fleet-restart.ts, which owns the simulated
 * cloud) and its node workers (bench/fleet/worker.ts, each running a share of the fleet's
 * ipamd in its own thread). Every request carries an id; the worker answers it once, with
 * that id, either with its result or with `error`.
 */

/** What a worker is given at start (`workerData`). */
export interface FleetWorkerData {
  /** The simulated EC2 endpoint (http://127.0.0.1:port). */
  ec2Endpoint: string;
  /** The nodes of this worker: instance id and that instance's IMDS endpoint. */
  nodes: Array<{ instanceId: string; imdsEndpoint: string }>;
  /** ipamd environment added to every node's defaults. */
  env: Record<string, string>;
}

/** What the bench asks a worker to do. */
export type FleetCall =
  /** Start every node (`batch` at a time, unthrottled) and ADD `pods` pods on each. */
  | { op: 'warm-up'; pods: number; batch: number }
  /**
   * Stop every ipamd (graceful) and close the clients; with `dropLimitsCache`, delete each
   * node's cached instance-type limits (`instance-limits.json`), as on a first boot.
   */
  | { op: 'stop'; dropLimitsCache: boolean }
  /**
   * Start every node at once (a failed start retried after 2 s, doubling up to 32 s); as a
   * node serves, repeat its pods' ADDs and ADD `newPods` new ones. Times are ms after `t0`
   * (ms epoch, the bench's clock: threads share it).
   */
  | { op: 'restart'; t0: number; newPods: number }
  /** How many nodes still wait for their background EC2 confirm. */
  | { op: 'confirming' }
  /** Start (`start`) or stop and write (`stop`, to `file`) a V8 CPU profile of this thread. */
  | { op: 'profile'; action: 'start' }
  | { op: 'profile'; action: 'stop'; file: string }
  /** Stop every ipamd and remove every node's parts. */
  | { op: 'close' };

/** A request from the bench to a worker: a call and the id its answer carries. */
export type FleetRequest = FleetCall & { id: number };

/** What one node did in the restart. */
export interface NodeRestartResult {
  /** ms after t0 when the node served. */
  servedAtMs: number;
  startFailures: number;
  startErrors: string[];
  failedPods: string[];
}

/** A worker's answer to request `id`. */
export interface FleetReply {
  id: number;
  /** The restart's results, one per node (op `restart`). */
  restart?: NodeRestartResult[];
  /** Nodes still confirming (op `confirming`). */
  confirming?: number;
  /** The request failed: its message and stack. */
  error?: string;
}
