/**
 * A second, empty containerd on a cluster node, owned by the test that starts it: the same
 * containerd 2.x build as the node's own, in the node's network, mount and UTS namespaces,
 * with its own root (in the node's dir), state and sockets under a node path of its own
 * (`/run/containerd/empty`, inside the node's bound `/run/containerd`), and NRI left out (the
 * node's containerd serves that socket). It runs no pod: a CRI runtime that answers
 * `Version` exactly as the node's does and lists no sandbox, what an operator's
 * `criSocket` set to the wrong runtime's socket shows ipamd (issue 37).
 */
import { mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { ClusterBinaries } from './binaries.js';
import type { ClusterNode } from './cluster.js';
import { containerdConfig } from './configs.js';
import { startDaemon, waitStarted } from './daemon-process.js';
import { criAnswers } from './node-processes.js';

/** The empty runtime's state and sockets, as node paths. */
export const EMPTY_RUNTIME_DIR = '/run/containerd/empty';

/** A running empty containerd. */
export interface EmptyRuntime {
  /** Its CRI socket as the node (and ipamd's hostPath) sees it. */
  nodeSocket: string;
  /** The same socket, test-side. */
  socket: string;
  /** Stops it (SIGTERM, then SIGKILL after 10 s) and removes its state and root. Idempotent. */
  stop(): Promise<void>;
}

/**
 * Starts an empty containerd on `node` and waits (≤ 60 s) until its CRI answers `Version`.
 * @throws Error with its log tail when it exits or does not answer (it is stopped first).
 */
export async function startEmptyRuntime(bins: ClusterBinaries, node: ClusterNode): Promise<EmptyRuntime> {
  const dir = path.join(node.dir, 'containerd-empty');
  const root = path.join(dir, 'root');
  await mkdir(root, { recursive: true });
  await mkdir(node.host(EMPTY_RUNTIME_DIR), { recursive: true });
  const config = path.join(dir, 'containerd.toml');
  // No pod ever runs here: the pinned sandbox image is named only because the CRI plugin asks for one.
  await writeFile(
    config,
    containerdConfig({
      root,
      pauseRef: 'registry.k8s.io/pause:3.10',
      runDir: EMPTY_RUNTIME_DIR,
      disable: ['io.containerd.nri.v1.nri'],
    }),
  );
  const nodeSocket = `${EMPTY_RUNTIME_DIR}/containerd.sock`;
  const socket = node.host(nodeSocket);
  const p = startDaemon({
    name: 'containerd-empty',
    argv: [path.join(bins.containerd, 'containerd'), '--config', config],
    logFile: path.join(dir, 'containerd.log'),
    netns: node.netns.path,
    mountns: node.mountNs.nsPath,
    ...(node.mountNs.utsPath ? { uts: node.mountNs.utsPath } : {}),
    env: { PATH: `${bins.containerd}:${process.env['PATH'] ?? '/usr/sbin:/usr/bin:/sbin:/bin'}` },
  });
  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> =>
    (stopping ??= (async () => {
      await p.stop(10_000);
      await rm(node.host(EMPTY_RUNTIME_DIR), { recursive: true, force: true });
      await rm(dir, { recursive: true, force: true });
    })());
  try {
    await waitStarted(p, 'CRI Version on the empty containerd', () => criAnswers(socket), 60_000, 200);
  } catch (e) {
    await stop();
    throw e;
  }
  return { nodeSocket, socket, stop };
}
