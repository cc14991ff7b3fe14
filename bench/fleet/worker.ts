/**
 * A node worker of the fleet bench: runs its share of the fleet's ipamd (in-process,
 * `startDaemon`, each with its own temp dir, checkpoint and CRI stand-in) in this thread,
 * against the simulated cloud the bench's main thread serves over HTTP, and answers the
 * bench's requests (messages.ts). On a node each ipamd has its own CPU; a fleet on one
 * event loop measures that loop's queue, so the bench spreads the daemons over threads.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parentPort, workerData } from 'node:worker_threads';
import { startCriStandIn } from '../../sim/cri/index.js';
import { ipamdClient, type GrpcError, type TestIpamdClient } from '../../kit/ipamd-client.js';
import { SimNode } from '../../kit/sim-node.js';
import { sleep } from '../bench-util.js';
import type { FleetReply, FleetRequest, FleetWorkerData, NodeRestartResult } from './messages.js';
import { startCpuProfile, type CpuProfile } from './profile.js';

interface FleetNode {
  node: SimNode;
  client?: TestIpamdClient;
  /** Pod id → the IP its first ADD got. */
  pods: Map<string, string>;
}

const data = workerData as FleetWorkerData;
const fleet: FleetNode[] = [];
let profile: CpuProfile | undefined;
let newSeq = 0;

async function buildFleet(): Promise<void> {
  for (const n of data.nodes) {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'eni-ipam-fleet-'));
    const cri = await startCriStandIn({ socketPath: path.join(dir, 'cri.sock') }).catch(async (e: Error) => {
      await rm(dir, { recursive: true, force: true });
      throw e;
    });
    const endpoints = { ec2Endpoint: data.ec2Endpoint, imdsEndpointFor: () => n.imdsEndpoint };
    const node = new SimNode(endpoints, n.instanceId, dir, 'in-process', cri, data.env, async () => {
      await cri.close();
      await rm(dir, { recursive: true, force: true });
    });
    fleet.push({ node, pods: new Map() });
  }
}

/** ADDs pod `id` on `f` (registered with the CRI stand-in first, as kubelet runs the sandbox); resolves with its IP. */
async function addPod(f: FleetNode, id: string): Promise<string> {
  f.node.cri?.add({ id, name: `pod-${id}`, namespace: 'fleet', uid: `uid-${id}` });
  const r = await f.client!.add(id);
  f.node.cri?.setIp(id, r.ipv4_addr);
  return r.ipv4_addr;
}

async function warmUp(pods: number, batch: number): Promise<void> {
  for (let i = 0; i < fleet.length; i += batch) {
    await Promise.all(
      fleet.slice(i, i + batch).map(async (f) => {
        await f.node.start();
        f.client = ipamdClient(f.node.socket);
        for (let p = 0; p < pods; p++) {
          const id = `${f.node.instanceId}-p${p}`;
          f.pods.set(id, await addPod(f, id));
        }
      }),
    );
  }
}

async function restartOne(f: FleetNode, t0: number, newPods: number): Promise<NodeRestartResult> {
  const r: NodeRestartResult = { servedAtMs: Infinity, startFailures: 0, startErrors: [], failedPods: [] };
  for (let backoff = 2000; ; backoff = Math.min(backoff * 2, 32_000)) {
    try {
      await f.node.start();
      break;
    } catch (e) {
      r.startFailures++;
      r.startErrors.push(`${f.node.instanceId}: ${(e as Error).message}`);
      await sleep(backoff);
    }
  }
  r.servedAtMs = Date.now() - t0;
  // A node's kubelet calls only once the node serves.
  f.client = ipamdClient(f.node.socket);
  await Promise.all(
    [...f.pods].map(async ([id, ip]) => {
      try {
        const got = await addPod(f, id);
        if (got !== ip) r.failedPods.push(`${id}: had ${ip}, repeated ADD returned ${got}`);
      } catch (e) {
        r.failedPods.push(`${id} (existing): ${(e as GrpcError).details ?? (e as Error).message}`);
      }
    }),
  );
  await Promise.all(
    Array.from({ length: newPods }, async () => {
      const id = `${f.node.instanceId}-new${newSeq++}`;
      try {
        await addPod(f, id);
      } catch (e) {
        r.failedPods.push(`${id} (new): ${(e as GrpcError).details ?? (e as Error).message}`);
      }
    }),
  );
  return r;
}

async function handle(m: FleetRequest): Promise<Omit<FleetReply, 'id'>> {
  switch (m.op) {
    case 'warm-up':
      await warmUp(m.pods, m.batch);
      return {};
    case 'stop':
      // Each client closes here: its channel would otherwise retry the missing socket with
      // back-off through the restart, CPU this thread shares with the daemons.
      await Promise.all(
        fleet.map(async (f) => {
          await f.node.stop();
          f.client?.close();
          f.client = undefined;
          if (m.dropLimitsCache) await rm(path.join(f.node.dir, 'instance-limits.json'), { force: true });
        }),
      );
      return {};
    case 'restart':
      return { restart: await Promise.all(fleet.map((f) => restartOne(f, m.t0, m.newPods))) };
    case 'confirming':
      return {
        confirming: fleet.filter((f) => f.node.daemonHandle?.gate.describe().some((d) => d.startsWith('ec2-confirm')))
          .length,
      };
    case 'profile':
      if (m.action === 'start') profile = await startCpuProfile();
      else await profile?.stop(m.file);
      return {};
    case 'close':
      await Promise.all(
        fleet.map(async (f) => {
          f.client?.close();
          await f.node.close();
        }),
      );
      return {};
  }
}

const port = parentPort!;
const ready = buildFleet();
port.on('message', (m: FleetRequest) => {
  ready
    .then(() => handle(m))
    .then(
      (r) => port.postMessage({ id: m.id, ...r } satisfies FleetReply),
      (e: Error) => port.postMessage({ id: m.id, error: e.stack ?? String(e) } satisfies FleetReply),
    );
});
