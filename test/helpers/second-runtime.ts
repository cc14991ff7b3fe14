/**
 * A second, healthy container runtime on the same node: the "wrong but reachable" runtime
 * of the seed outage (docs/design.md#13-evidence-before-trust), where the socket ipamd was given belonged to a runtime
 * kubelet did not use. It is a private containerd 1.6 (containerd.ts) in the node's own
 * network namespace, so whatever it runs leaves host-side veths and routes beside the
 * pods' (as docker's and containerd's did on the outage's node), with its own CNI
 * network: Debian's `ptp` + `host-local` on {@link FOREIGN_SUBNET}, an address range no
 * ENI of the simulated instance holds. Its sandboxes are "foreign": unrelated to ipamd.
 *
 * Needs root, `scripts/ensure-deps.sh --containerd` (containerd, runc and Debian's
 * containernetworking-plugins in /usr/lib/cni).
 */
import { randomUUID } from 'node:crypto';
import { chmod, copyFile, mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { startContainerd, type Containerd } from '../../kit/containerd.js';
import { CriTestClient } from '../../kit/cri-client.js';

/** The foreign network's address range (not in the sim's 10.0.0.0/24 subnet). */
export const FOREIGN_SUBNET = '172.30.0.0/24';

/** A running second runtime. */
export interface SecondRuntime {
  containerd: Containerd;
  cri: CriTestClient;
  /** `unix://<socket>`: what CRI_RUNTIME_ENDPOINT is set to when ipamd is pointed at it. */
  endpoint: string;
  /** Its socket path (the part of the endpoint a freeze reason names). */
  socket: string;
  /**
   * Runs `count` sandboxes named `<prefix>-<i>` on the foreign network.
   * @returns their sandbox ids and IPs.
   * @throws the CRI error when a RunPodSandbox fails.
   */
  runForeign(prefix: string, count: number): Promise<Array<{ id: string; ip: string }>>;
  /** Stops and removes every sandbox it runs (idempotent). */
  removeAll(): Promise<void>;
  /** Stops containerd and removes everything it created (containerd.ts `stop`). */
  close(): Promise<void>;
}

/**
 * Starts the second runtime under `dir` (created if missing) in the node namespace `nodeNetnsPath`.
 * @throws Error (after cleaning up) when containerd does not start.
 */
export async function startSecondRuntime(o: { dir: string; nodeNetnsPath: string }): Promise<SecondRuntime> {
  const binDir = path.join(o.dir, 'cni', 'bin');
  const confDir = path.join(o.dir, 'cni', 'conf');
  await mkdir(binDir, { recursive: true });
  await mkdir(confDir, { recursive: true });
  for (const bin of ['loopback', 'ptp', 'host-local']) {
    await copyFile(path.join('/usr/lib/cni', bin), path.join(binDir, bin));
    await chmod(path.join(binDir, bin), 0o755);
  }
  const conflist = {
    cniVersion: '1.0.0',
    name: 'foreign-net',
    plugins: [
      {
        type: 'ptp',
        ipMasq: false,
        ipam: { type: 'host-local', ranges: [[{ subnet: FOREIGN_SUBNET }]], dataDir: path.join(o.dir, 'host-local') },
      },
    ],
  };
  await writeFile(path.join(confDir, '10-foreign.conflist'), JSON.stringify(conflist));
  const containerd = await startContainerd({
    baseDir: path.join(o.dir, 'containerd'),
    nodeNetnsPath: o.nodeNetnsPath,
    cniBinDir: binDir,
    cniConfDir: confDir,
  });
  const cri = new CriTestClient(containerd.socket, 60_000);
  return {
    containerd,
    cri,
    socket: containerd.socket,
    endpoint: `unix://${containerd.socket}`,
    async runForeign(prefix, count) {
      const out: Array<{ id: string; ip: string }> = [];
      for (let i = 0; i < count; i++) {
        const id = await cri.runPodSandbox({ name: `${prefix}-${i}`, namespace: 'other', uid: randomUUID() });
        out.push({ id, ip: (await cri.podSandboxStatus(id)).status?.network?.ip ?? '' });
      }
      return out;
    },
    async removeAll() {
      for (const sb of await cri.listPodSandbox()) {
        await cri.stopPodSandbox(sb.id);
        await cri.removePodSandbox(sb.id);
      }
    },
    async close() {
      cri.close();
      await containerd.stop();
    },
  };
}
