/**
 * `npm run cluster -- up [--nodes N] [--instance-types t1,t2,…] [--ip-family ipv4|ipv6|dual]|down|status`:
 * a real Kubernetes of N nodes (default 1) on this machine (cluster.ts) with eni-ipam installed
 * by helm from charts/eni-ipam, on the simulated cloud and its VPC data plane.
 *
 * - `up`: checks its options (a bad one: one line naming it and what is accepted, nothing
 *   started), then starts a supervisor process (this file with `supervise`) that owns the cluster and
 *   the simulated cloud, waits until it reports ready (the Node Ready with eni-ipam serving)
 *   or failed, and prints how to reach it with kubectl. Exit 0 when ready; 1 with one line
 *   naming what failed, having removed everything.
 * - `down`: stops the supervisor (which removes everything it made), then removes whatever
 *   a supervisor that died left behind (namespaces, processes, mounts, cgroups).
 * - `status`: what runs: each node's network and mount namespaces (what `nsenter` enters to use
 *   `ctr`/`crictl` on its containerd: docs/real-cluster.md), the Nodes and the pods.
 *
 * State: /run/eni-ipam-cluster/state.json (ENI_IPAM_CLUSTER_STATE names another dir: the tests
 * use their own, so two test runs on one machine do not read each other's); while it runs,
 * `kubeconfig` (admin) and `kubectl` (the one built with the cluster) beside it.
 */
import { spawn } from 'node:child_process';
import { existsSync, openSync, readFileSync, closeSync } from 'node:fs';
import { copyFile, mkdir, rm, symlink, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { waitFor } from '../wait.js';
import { alive } from './daemon-process.js';
import { startCluster, type ClusterOptions } from './cluster.js';
import { parseUpOptions } from './up-options.js';
import { imageDebianDrift } from '../image-archive.js';
import { installEniIpam } from './install.js';
import { purgeLeftovers } from './purge.js';

const STATE_DIR = process.env['ENI_IPAM_CLUSTER_STATE'] || '/run/eni-ipam-cluster';
const STATE = `${STATE_DIR}/state.json`;
const LOG = `${STATE_DIR}/supervisor.log`;

/** What the supervisor writes once the cluster is up (or failed). */
interface State {
  phase: 'starting' | 'ready' | 'failed';
  pid: number;
  dir?: string;
  /** Every node: name, instance, type, primary IP, network namespace (name) and mount namespace (`/proc/<pid>/ns/mnt`). */
  nodes?: Array<{
    name: string;
    instanceId: string;
    instanceType: string;
    ip: string;
    netns: string;
    mountNs?: string;
  }>;
  kubeconfig?: string;
  kubectl?: string;
  error?: string;
  /** What the operator should know but did not stop the cluster (e.g. Debian packages newer than the image's lock). */
  warnings?: string[];
}

const readState = (): State | undefined => {
  try {
    return JSON.parse(readFileSync(STATE, 'utf8')) as State;
  } catch {
    return undefined;
  }
};

async function supervise(opts: ClusterOptions): Promise<void> {
  const write = (s: State): Promise<void> => writeFile(STATE, JSON.stringify(s, null, 2));
  await write({ phase: 'starting', pid: process.pid });
  let cluster: Awaited<ReturnType<typeof startCluster>> | undefined;
  let stopping = false;
  const stop = async (): Promise<void> => {
    if (stopping) return;
    stopping = true;
    await cluster?.close().catch((e: Error) => console.error(`eni-ipam cluster: ${e.message}`));
    for (const f of [STATE, `${STATE_DIR}/kubeconfig`, `${STATE_DIR}/kubectl`]) await rm(f, { force: true });
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop());
  process.on('SIGINT', () => void stop());
  try {
    cluster = await startCluster(opts);
    const family = opts.ipFamily ?? 'ipv4';
    await installEniIpam(cluster, {
      wait: true,
      ...(family !== 'ipv4' ? { values: { ipFamily: family, env: { ENABLE_PREFIX_DELEGATION: 'true' } } } : {}),
    });
    // Stable paths for people: the admin kubeconfig and the kubectl built with the cluster.
    const kubeconfig = `${STATE_DIR}/kubeconfig`;
    const kubectl = `${STATE_DIR}/kubectl`;
    await copyFile(cluster.kubeconfig, kubeconfig);
    await rm(kubectl, { force: true });
    await symlink(`${cluster.bins.k8s}/kubectl`, kubectl);
    const nodes = cluster.nodes.map((n) => ({
      name: n.name,
      instanceId: n.instanceId,
      instanceType: n.instanceType,
      ip: n.ip,
      netns: n.netns.name,
      mountNs: n.mountNs.nsPath,
    }));
    const drift = imageDebianDrift();
    await write({
      phase: 'ready',
      pid: process.pid,
      dir: cluster.dir,
      nodes,
      kubeconfig,
      kubectl,
      ...(drift ? { warnings: [`the image was built anyway: ${drift}`] } : {}),
    });
    console.log(`eni-ipam cluster: ready (${cluster.dir})`);
  } catch (e) {
    const error = (e as Error).message;
    console.error(`eni-ipam cluster: ${error}`);
    await cluster?.close().catch(() => undefined);
    await write({ phase: 'failed', pid: process.pid, error: error.split('\n')[0] ?? error });
    process.exit(1);
  }
}

async function up(args: string[]): Promise<number> {
  const parsed = parseUpOptions(args);
  if ('error' in parsed) {
    console.error(`eni-ipam cluster: ${parsed.error}`);
    return 2;
  }
  const s = readState();
  if (s && alive(s.pid)) {
    console.error(`eni-ipam cluster: already running (supervisor pid ${s.pid}); \`npm run cluster -- down\` first`);
    return 1;
  }
  await purgeLeftovers(s?.dir);
  await mkdir(STATE_DIR, { recursive: true });
  await rm(STATE, { force: true });
  const fd = openSync(LOG, 'w');
  const env = { ...process.env };
  delete env['NODE_EXTRA_CA_CERTS'];
  const child = spawn(process.execPath, [fileURLToPath(import.meta.url), 'supervise', JSON.stringify(parsed)], {
    detached: true,
    stdio: ['ignore', fd, fd],
    env,
  });
  closeSync(fd);
  child.unref();
  console.error(`eni-ipam cluster: starting (supervisor pid ${child.pid}, log ${LOG})`);
  const st = await waitFor(
    'the cluster to be ready',
    () => {
      const x = readState();
      if (x && x.phase !== 'starting') return x;
      if (!alive(child.pid!)) return { phase: 'failed', pid: child.pid!, error: 'the supervisor died' } as State;
      return undefined;
    },
    45 * 60_000,
    500,
  );
  if (st.phase !== 'ready') {
    console.error(`eni-ipam cluster: up failed: ${st.error} (log: ${LOG})`);
    await purgeLeftovers(st.dir);
    return 1;
  }
  for (const w of st.warnings ?? []) console.error(`eni-ipam cluster: warning: ${w}`);
  console.log(
    `eni-ipam cluster: ready. Reach it with:\n  export KUBECONFIG=${st.kubeconfig}\n  ${st.kubectl} get nodes,pods -A -o wide`,
  );
  return 0;
}

async function down(): Promise<number> {
  const s = readState();
  if (s && alive(s.pid)) {
    process.kill(s.pid, 'SIGTERM');
    await waitFor('the supervisor to exit', () => !alive(s.pid), 180_000, 250).catch(() => {
      process.kill(s.pid, 'SIGKILL');
    });
  }
  await purgeLeftovers(s?.dir);
  await rm(STATE, { force: true });
  console.log('eni-ipam cluster: down');
  return 0;
}

async function status(): Promise<number> {
  const s = readState();
  if (!s || !alive(s.pid)) {
    console.log('eni-ipam cluster: not running');
    return s ? 1 : 0;
  }
  console.log(`eni-ipam cluster: ${s.phase} (supervisor pid ${s.pid}, dir ${s.dir ?? '?'})`);
  for (const n of s.nodes ?? [])
    console.log(
      `  node ${n.name}: ${n.instanceId} (${n.instanceType}), ${n.ip}, network namespace ${n.netns}${n.mountNs ? `, mount namespace ${n.mountNs}` : ''}`,
    );
  if (s.kubectl && s.kubeconfig && existsSync(s.kubeconfig)) {
    const c = spawn(s.kubectl, ['--kubeconfig', s.kubeconfig, 'get', 'nodes,pods', '-A', '-o', 'wide'], {
      stdio: 'inherit',
    });
    await new Promise((r) => c.once('close', r));
  }
  return 0;
}

const cmd = process.argv[2];
const rest = process.argv.slice(3);
const commands: Record<string, () => Promise<number | void>> = {
  up: () => up(rest),
  down,
  status,
  supervise: () => supervise(JSON.parse(rest[0] ?? '{}') as ClusterOptions),
};
const fn = cmd ? commands[cmd] : undefined;
if (!fn) {
  console.error(`eni-ipam cluster: unknown command '${cmd ?? ''}' (accepted: up, down, status)`);
  process.exit(2);
}
fn().then(
  (code) => {
    if (typeof code === 'number') process.exit(code);
  },
  (e: Error) => {
    console.error(`eni-ipam cluster: ${e.message.split('\n')[0]}`);
    process.exit(1);
  },
);
