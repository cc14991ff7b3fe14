/**
 * What the containerd node harness (containerd-node.ts) sets up around containerd and
 * ipamd: the CNI bin and conf dirs containerd reads, the netns bridge that lets an ipamd
 * inside the node namespace reach the sim and the stand-in, and ipamd's base environment.
 */
import { copyFile, chmod, mkdir, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { SimCloud } from '../sim/index.js';
import type { CleanupStack } from './cleanup-stack.js';
import { PLUGIN_PATH } from './cni-exec.js';
import { bridgeNetns } from './netns-bridge.js';

/** ipamd's introspection port inside the node namespace (with `ipamdInNodeNetns`; a fresh namespace, nothing else binds it). */
export const NODE_INTROSPECTION_PORT = 61679;

/** Writes `text` to `file` as temp-file-in-the-same-dir + rename (what containerd's conf watcher reloads on). */
async function writeViaRename(file: string, text: string): Promise<void> {
  const tmp = path.join(path.dirname(file), `.${path.basename(file)}.tmp-${process.pid}`);
  await writeFile(tmp, text);
  await rename(tmp, file);
}

/** The CNI dirs {@link writeCniDirs} made, and the plugin's network configuration. */
export interface CniDirs {
  /** `<dir>/cni/bin`: eni-ipam (the bundled plugin), loopback and the extra bins. */
  binDir: string;
  /** `<dir>/cni/conf`: `10-eni-ipam.conflist`. */
  confDir: string;
  /** The conflist's first plugin entry + its name/cniVersion (for running the plugin by hand). */
  pluginConf: Record<string, unknown>;
}

/**
 * Makes `<dir>/cni/bin` (the plugin, Debian's loopback, each of `extraBins` mode 0755) and
 * `<dir>/cni/conf` with the conflist (`networkName`: eni-ipam talking to `socket`, logging
 * to `cniLog`, with `pluginConfig`'s keys added, then `chainedPlugins`), written through a rename.
 */
export async function writeCniDirs(o: {
  dir: string;
  networkName: string;
  socket: string;
  cniLog: string;
  chainedPlugins?: object[];
  extraBins?: Record<string, string>;
  pluginConfig?: Record<string, unknown>;
}): Promise<CniDirs> {
  const binDir = path.join(o.dir, 'cni', 'bin');
  const confDir = path.join(o.dir, 'cni', 'conf');
  await mkdir(binDir, { recursive: true });
  await mkdir(confDir, { recursive: true });
  await copyFile(PLUGIN_PATH, path.join(binDir, 'eni-ipam'));
  await chmod(path.join(binDir, 'eni-ipam'), 0o755);
  await copyFile('/usr/lib/cni/loopback', path.join(binDir, 'loopback'));
  await chmod(path.join(binDir, 'loopback'), 0o755);
  for (const [name, text] of Object.entries(o.extraBins ?? {}))
    await writeFile(path.join(binDir, name), text, { mode: 0o755 });
  const conflist = {
    cniVersion: '1.0.0',
    name: o.networkName,
    plugins: [
      { type: 'eni-ipam', ipamdSocket: o.socket, logFile: o.cniLog, ...o.pluginConfig },
      ...(o.chainedPlugins ?? []),
    ],
  };
  await writeViaRename(path.join(confDir, '10-eni-ipam.conflist'), JSON.stringify(conflist));
  return {
    binDir,
    confDir,
    pluginConf: { cniVersion: conflist.cniVersion, name: conflist.name, ...conflist.plugins[0] },
  };
}

/**
 * Bridges the node namespace `netnsPath` to the test's: inward to the sim's EC2 and IMDS
 * and the stand-in's API (`kubeUrl`), outward from ipamd's introspection
 * ({@link NODE_INTROSPECTION_PORT}). The bridge's close is pushed on `cleanups`.
 * @returns the test-side base URL of ipamd's introspection (`http://127.0.0.1:<port>`).
 */
export async function bridgeIntrospection(o: {
  netnsPath: string;
  dir: string;
  sim: SimCloud;
  kubeUrl: string;
  cleanups: CleanupStack;
}): Promise<string> {
  const port = (url: string): number => Number(new URL(url).port);
  const bridge = await bridgeNetns({
    netnsPath: o.netnsPath,
    dir: o.dir,
    inward: [port(o.sim.ec2Endpoint), port(o.sim.imdsEndpoint), port(o.kubeUrl)],
    outward: [NODE_INTROSPECTION_PORT],
  });
  o.cleanups.push(() => bridge.close());
  return `http://127.0.0.1:${bridge.outward.get(NODE_INTROSPECTION_PORT)}`;
}

/**
 * ipamd's base environment on the node: the sim's endpoints, its socket and checkpoint
 * (`<dir>/ipam.json`), containerd's CRI, the stand-in as node `nodeName`, short GC
 * interval (1 s) and grace (2 s), no host networking nor CNI install, the kernel source in
 * the node namespace; introspection on {@link NODE_INTROSPECTION_PORT} with
 * `introspectionInNode`; then `extra` (the test's `ipamdEnv`) over all of it.
 */
export function nodeIpamdEnv(o: {
  sim: SimCloud;
  socket: string;
  dir: string;
  criSocket: string;
  nodeName: string;
  kubeconfig: string;
  nodeNetnsPath: string;
  introspectionInNode: boolean;
  extra: NodeJS.ProcessEnv | undefined;
}): NodeJS.ProcessEnv {
  return {
    AWS_EC2_ENDPOINT: o.sim.ec2Endpoint,
    AWS_EC2_METADATA_SERVICE_ENDPOINT: o.sim.imdsEndpoint,
    ENI_IPAM_SOCKET: o.socket,
    ENI_IPAM_CHECKPOINT_PATH: path.join(o.dir, 'ipam.json'),
    CRI_RUNTIME_ENDPOINT: `unix://${o.criSocket}`,
    MY_NODE_NAME: o.nodeName,
    KUBECONFIG: o.kubeconfig,
    ENI_IPAM_GC_INTERVAL: '1s',
    ENI_IPAM_GC_GRACE: '2s',
    ENI_IPAM_POOL_INTERVAL: '200ms',
    AWS_VPC_K8S_CNI_LOGLEVEL: 'debug',
    // ipamd runs in the test's own namespace or the node's: it must not touch the host's links, rules or /etc/cni.
    ENI_IPAM_HOST_NETWORK: 'false',
    ENI_IPAM_INSTALL_CNI: 'false',
    // The pods' veths and routes live in the node netns: ipamd's kernel source reads them there.
    ENI_IPAM_CNI_EXEC_NETNS: o.nodeNetnsPath,
    ...(o.introspectionInNode ? { INTROSPECTION_BIND_ADDRESS: `127.0.0.1:${NODE_INTROSPECTION_PORT}` } : {}),
    ...o.extra,
  };
}
