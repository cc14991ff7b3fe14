/**
 * The main job, run inside the network namespace that stands for the node: the simulated
 * cloud (EC2 + IMDSv2 on this namespace's loopback), the node plugged into the simulated
 * VPC's data plane (./vpc-node.ts), the real ipamd with host networking on (per-ENI route
 * tables, ip rules, SNAT: all in this namespace), N pod namespaces, the real CNI ADD for
 * each, a TCP connect from each pod to the node and to a VPC peer (each reports the source
 * address it saw), a table, the pool state, DEL for every pod, and a clean teardown.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { SimCloud } from '../sim/index.js';
import { cleanupStack } from '../kit/cleanup-stack.js';
import { startIpamd, type IpamdProcess } from '../kit/ipamd-process.js';
import { run, type Netns } from '../kit/netns.js';
import { addPods, createPods, deletePods, probePods, recordEnis, type PluginConfig, type Pod } from './pods.js';
import { printPodTable, printPool, type Print } from './print.js';
import { plugDemoNode, type DemoVpc } from './vpc-node.js';

/** Demo settings. */
export interface ScenarioOptions {
  pods: number;
  instanceType: string;
  /** Keep ipamd serving until `signal` aborts instead of running pods. */
  daemon: boolean;
  /** Extra environment for ipamd (WARM_IP_TARGET=…). */
  ipamdEnv: NodeJS.ProcessEnv;
  /** The node namespace this process runs in (its name is `<nsPrefix>-node`). */
  node: Netns;
  /** Prefix of every named namespace the demo makes: `<p>-vpc`, `<p>-pod-<i>`. */
  nsPrefix: string;
  /** Aborted on SIGINT/SIGTERM: the scenario stops at its next step and removes everything. */
  signal: AbortSignal;
  print: Print;
}

const NETWORK = 'aws-cni';
/** The TCP port of the node's listener and of the VPC peer. */
const PORT = 8080;

/** Runs the scenario; always tears down what it created. Resolves with a process exit code (130 when interrupted). */
export async function runScenario(o: ScenarioOptions): Promise<number> {
  const work = await mkdtemp(path.join(os.tmpdir(), 'eni-ipam-demo-'));
  // ipamd's log is the demo's evidence: it lives outside `work` (removed at the end) and is kept.
  const ipamdLog = path.join(os.tmpdir(), `${path.basename(work)}-ipamd.log`);
  o.print(`ipamd's log: ${ipamdLog} (kept after the demo)`);
  const teardown = cleanupStack();
  teardown.push(() => rm(work, { recursive: true, force: true }));
  try {
    await run('ip', ['link', 'set', 'lo', 'up']);
    const sim = new SimCloud({ seed: 1 });
    await sim.start();
    teardown.push(() => sim.stop());
    const subnet = sim.addSubnet({ cidr: '10.0.0.0/24' });
    const inst = sim.launchInstance({ instanceType: o.instanceType, subnetId: subnet.subnetId });
    const nodeIp = inst.privateIpAddress;
    o.print(
      `simulated cloud: EC2 ${sim.ec2Endpoint}, IMDS ${sim.imdsEndpoint}, ${o.instanceType} ${inst.instanceId} (node IP ${nodeIp}, subnet ${subnet.cidr}, VPC ${sim.state.vpcCidr})`,
    );
    const vpc = await plugDemoNode({
      sim,
      instanceId: inst.instanceId,
      node: o.node,
      vpcName: `${o.nsPrefix}-vpc`,
      peerPort: PORT,
    });
    teardown.push(() => vpc.close());
    o.print(
      `VPC data plane: namespace ${vpc.dataPlane.netns.name}, eth0 ${nodeIp} via VPC router ${vpc.gateway}; VPC peer ${vpc.peer.address}:${PORT} (outside the subnet)`,
    );
    o.signal.throwIfAborted();
    const socket = path.join(work, 'ipamd.sock');
    const env = ipamdEnvFor(o, sim, work);
    const ipamd = await startIpamd({ env, logFile: ipamdLog });
    const stopped = once(() => ipamd.stop());
    teardown.push(stopped);
    o.print(
      `ipamd pid ${ipamd.pid} serving on ${socket}, host networking ${env.ENI_IPAM_HOST_NETWORK === 'true' ? 'on' : 'off'} (log: ${ipamdLog})`,
    );
    // The native shim is what ipamd installs as `eni-ipam`: it forwards each call to ipamd's
    // exec socket (default: cni-exec.sock beside ENI_IPAM_SOCKET), as on a real node.
    const execSocket = path.join(work, 'cni-exec.sock');
    const config = { cniVersion: '1.0.0', name: NETWORK, type: 'eni-ipam', ipamdSocket: socket, execSocket, mtu: 9001 };
    const node: DemoNode = {
      sim,
      nodeIp,
      socket,
      checkpointPath: env.ENI_IPAM_CHECKPOINT_PATH,
      ipamd,
      stopIpamd: stopped,
      config,
      vpc,
    };
    if (o.daemon) {
      await serveAsDaemon(o, node);
      return 0;
    }
    return await podsRound(o, node, teardown);
  } catch (e) {
    if (!o.signal.aborted) throw e;
    o.print('interrupted: removing everything the demo made');
    return 130;
  } finally {
    await teardown.close().catch((e: Error) => o.print(`teardown: ${e.message}`));
    o.print(`ipamd's log is kept at ${ipamdLog}`);
  }
}

/** ipamd's environment: the simulated cloud, its files under `work`, host networking on, then the caller's settings. */
function ipamdEnvFor(o: ScenarioOptions, sim: SimCloud, work: string): NodeJS.ProcessEnv {
  return {
    AWS_EC2_ENDPOINT: sim.ec2Endpoint,
    AWS_EC2_METADATA_SERVICE_ENDPOINT: sim.imdsEndpoint,
    ENI_IPAM_SOCKET: path.join(work, 'ipamd.sock'),
    ENI_IPAM_CHECKPOINT_PATH: path.join(work, 'ipam.json'),
    // Per-ENI links, route tables, ip rules and SNAT, in this (the node's) namespace only.
    ENI_IPAM_HOST_NETWORK: 'true',
    // Daemon mode serves like a node: metrics on :61678, introspection on :61679 (loopback of the demo's node netns).
    ...(o.daemon
      ? {
          DISABLE_METRICS: 'false',
          METRICS_BIND_ADDRESS: '127.0.0.1:61678',
          INTROSPECTION_BIND_ADDRESS: '127.0.0.1:61679',
        }
      : {}),
    ...o.ipamdEnv,
  };
}

/** What the demo's node is made of once ipamd serves: shared by the steps below. */
interface DemoNode {
  sim: SimCloud;
  /** The node's primary private IPv4 (dotted quad), on the node netns' `eth0`. */
  nodeIp: string;
  /** ipamd's gRPC socket path. */
  socket: string;
  /** ipamd's checkpoint file path (as given in ipamd's environment). */
  checkpointPath: string | undefined;
  ipamd: IpamdProcess;
  /** SIGTERM to ipamd (SIGKILL after 15 s), once; resolves with its exit code. */
  stopIpamd: () => Promise<number | null>;
  config: PluginConfig;
  vpc: DemoVpc;
}

/** `fn` run at most once: later calls share the first call's promise. */
function once<T>(fn: () => Promise<T>): () => Promise<T> {
  let p: Promise<T> | undefined;
  return () => (p ??= fn());
}

/**
 * The pods' round: create, ADD, probe the node and the VPC peer, print, DEL, stop ipamd.
 * @returns 0 when every step succeeded and both ends saw every pod's own IP, else 1.
 * @throws Error from a step that cannot go on (an ADD that failed), or the abort reason.
 */
async function podsRound(o: ScenarioOptions, n: DemoNode, teardown: ReturnType<typeof cleanupStack>): Promise<number> {
  const { ipamd, sim, nodeIp, vpc } = n;
  let failed = false;
  // Answers with the source address it saw; what the pod sends is read and dropped, so each
  // connection ends when the pod closes it.
  const listener = net.createServer((s) => s.resume().end(`${s.remoteAddress ?? ''}\n`));
  await new Promise<void>((r) => listener.listen(PORT, nodeIp, r));
  teardown.push(async () => void listener.close());
  const pods: Pod[] = [];
  teardown.push(async () => {
    for (const p of pods) await p.ns.remove();
  });
  await createPods(o.pods, o.nsPrefix, pods, o.signal);
  await addPods(n.config, pods, o.signal);
  await recordEnis(ipamd.introspectionPort, pods);
  // The VPC routes every address EC2 says an ENI holds once this pass ends: no probe races it.
  await vpc.dataPlane.sync();
  const targets = { node: { host: nodeIp, port: PORT }, vpc: { host: vpc.peer.address, port: PORT } };
  const probed = await probePods(pods, targets, o.signal);
  if (!probed) failed = true;
  o.print('');
  printPodTable(o.print, `${nodeIp}:${PORT}`, `${vpc.peer.address}:${PORT}`, pods);
  o.print('');
  o.print(
    'The VPC routes each address to the ENI EC2 says holds it and drops a packet whose source the ENI it came in on does not hold (source/destination check):',
  );
  o.print(
    probed
      ? 'each pod reached the VPC peer through its own ENI, with its own IP: no SNAT inside the VPC.'
      : 'NOT every pod reached the node and the VPC peer with its own IP: see the FAILED cells above and the ipamd log.',
  );
  o.print('');
  printPool(o.print, 'pool after ADD', await ipamd.status(), sim);
  if (!(await deletePods(n.config, pods, o.print))) failed = true;
  printPool(o.print, 'pool after DEL', await ipamd.status(), sim);
  const code = await n.stopIpamd();
  o.print(`ipamd stopped on SIGTERM with exit code ${code}`);
  return failed || code !== 0 ? 1 : 0;
}

/** Daemon mode: prints how to reach ipamd and the VPC, then waits until `o.signal` aborts. */
async function serveAsDaemon(o: ScenarioOptions, n: DemoNode): Promise<void> {
  const { sim, ipamd, socket, config, vpc } = n;
  o.print(`daemon mode: ipamd keeps running; Ctrl-C stops it and removes everything.`);
  o.print(`  plugin config: ${JSON.stringify(config)}`);
  o.print(`  status: curl http://127.0.0.1:${ipamd.introspectionPort}/v1/status  (inside this network namespace)`);
  o.print(`  metrics: curl http://127.0.0.1:${ipamd.metricsPort ?? 61678}/metrics  (inside this network namespace)`);
  o.print(
    `  VPC: ip netns exec ${vpc.dataPlane.netns.name} ip route  (one route per address EC2 says an ENI holds); VPC peer ${vpc.peer.address}:${PORT} answers with the source address it saw`,
  );
  o.print(
    `  operator CLI (in the node netns above): AWS_EC2_ENDPOINT=${sim.ec2Endpoint} AWS_EC2_METADATA_SERVICE_ENDPOINT=${sim.imdsEndpoint} INTROSPECTION_BIND_ADDRESS=127.0.0.1:${ipamd.introspectionPort} ENI_IPAM_SOCKET=${socket} ENI_IPAM_CHECKPOINT_PATH=${n.checkpointPath} node dist/cli/main.js status`,
  );
  if (o.signal.aborted) return;
  await new Promise<void>((resolve) => o.signal.addEventListener('abort', () => resolve(), { once: true }));
}
