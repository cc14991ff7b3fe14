/**
 * One simulated node for property tests and benchmarks: an instance launched in a
 * (possibly shared) {@link SimCloud}, a temp dir for ipamd's socket and checkpoint, an
 * optional CRI stand-in, and the real ipamd — either in this process through
 * `startDaemon(loadConfig(env), silentLogger)` (the real daemon over its real gRPC
 * socket; cheap to restart, many fit in one process) or as the real binary in a child
 * process (so a restart can be a SIGKILL crash). `status()` is `GET /v1/status`.
 */
import path from 'node:path';
import { pino } from 'pino';
import { loadConfig } from '../ipamd/config.js';
import { ownPathEnv } from './own-paths.js';
import { startDaemon, type Daemon } from '../ipamd/daemon.js';
import { startIpamd, type IpamdProcess } from './ipamd-process.js';
import { SimCloud } from '../sim/index.js';
import type { CriStandIn } from '../sim/cri/index.js';
import { buildNode } from './node.js';

/** How ipamd runs: in this process (startDaemon) or as the real binary in a child. */
export type DaemonMode = 'in-process' | 'child';

/** Options of {@link createSimNode}. */
export interface SimNodeOptions {
  /** A cloud to share (several nodes); default: a new one ({@link simNodeWithCloud}). */
  sim?: SimCloud;
  /** Subnet to launch in (with `sim`); default: a new one of `subnetCidr`. */
  subnetId?: string;
  /** Without `sim`: the new cloud's seed (stable ids per test file). */
  seed?: number;
  /** CIDR of the new subnet (default 10.0.0.0/24); ignored with `subnetId`. */
  subnetCidr?: string;
  /** Default m5.large. */
  instanceType?: string;
  /** ipamd environment added to the node defaults (see {@link SimNode.env}). */
  env?: Record<string, string>;
  /** Default in-process. */
  mode?: DaemonMode;
  /** Serve a CRI stand-in so the evidence pass can read a runtime (default true). Without it releases stay frozen. */
  cri?: boolean;
}

/** A silent pino logger for in-process daemons. */
const silent = pino({ level: 'silent' });

/**
 * The SDK's default credential chain reads `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`
 * from the environment; the simulated EC2 does not check signatures. Sets dummy ones if
 * none are set, so in-process daemons do not fall back to the instance-profile lookup.
 */
export function ensureDummyAwsCredentials(): void {
  process.env.AWS_ACCESS_KEY_ID ||= 'AKIDSIMULATED';
  process.env.AWS_SECRET_ACCESS_KEY ||= 'simulated-secret';
}

/** Where a node's ipamd finds the simulated cloud: a {@link SimCloud}, or its endpoints when the cloud runs in another thread. */
export type SimEndpoints = Pick<SimCloud, 'ec2Endpoint' | 'imdsEndpointFor'>;

/** A simulated node; see the module docstring. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- /v1/status JSON; the property checks read its fields directly
type V1Status = any;

export class SimNode {
  /** The full ipamd environment (node defaults + options). */
  readonly env: Record<string, string>;
  /** Child mode: argv put before `node main.js` (e.g. a shell running node with the image entrypoint's flags). */
  childPrefix?: string[];
  private daemon?: Daemon;
  private child?: IpamdProcess;
  private port = 0;
  /** Number of daemon starts so far. */
  starts = 0;
  /** Fetches an introspection path (e.g. `/v1/stage-trace`) of the running ipamd as JSON. */
  async introspect(p: string): Promise<unknown> {
    return (await fetch(`http://127.0.0.1:${this.port}${p}`)).json();
  }

  /** The ipamd child's pid while it runs (child mode), for benches that read /proc. */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  constructor(
    readonly sim: SimEndpoints,
    readonly instanceId: string,
    readonly dir: string,
    readonly mode: DaemonMode,
    readonly cri: CriStandIn | undefined,
    extra: Record<string, string>,
    private readonly closeParts: () => Promise<void>,
  ) {
    this.env = {
      ...ownPathEnv(dir),
      AWS_EC2_ENDPOINT: sim.ec2Endpoint,
      AWS_EC2_METADATA_SERVICE_ENDPOINT: sim.imdsEndpointFor(instanceId),
      AWS_ACCESS_KEY_ID: process.env.AWS_ACCESS_KEY_ID ?? 'AKIDSIMULATED',
      AWS_SECRET_ACCESS_KEY: process.env.AWS_SECRET_ACCESS_KEY ?? 'simulated-secret',
      ENI_IPAM_SOCKET: this.socket,
      ENI_IPAM_CHECKPOINT_PATH: this.checkpoint,
      CRI_RUNTIME_ENDPOINT: `unix://${cri ? cri.socketPath : path.join(dir, 'no-cri.sock')}`,
      ENI_IPAM_INSTALL_CNI: 'false',
      ENI_IPAM_HOST_NETWORK: 'false',
      DISABLE_METRICS: 'true',
      AWS_VPC_K8S_CNI_LOGLEVEL: mode === 'child' ? 'info' : 'error',
      // As a child ipamd inherits it: in-process ones get the fast-restart switch from the environment too.
      ...(process.env.ENI_IPAM_FAST_RESTART ? { ENI_IPAM_FAST_RESTART: process.env.ENI_IPAM_FAST_RESTART } : {}),
      ...extra,
    };
  }

  /** ipamd's gRPC socket. */
  get socket(): string {
    return path.join(this.dir, 'ipamd.sock');
  }

  /** ipamd's checkpoint file. */
  get checkpoint(): string {
    return path.join(this.dir, 'ipam.json');
  }

  /** The in-process daemon while it runs (its datastore, gate, pool); undefined in child mode. */
  get daemonHandle(): Daemon | undefined {
    return this.daemon;
  }

  /** True between a successful {@link start} and {@link stop}. */
  get running(): boolean {
    return !!(this.daemon || this.child);
  }

  /**
   * Starts ipamd and resolves once it serves.
   * @throws Error (ConfigError for a bad env; the daemon's own start-up error otherwise).
   */
  async start(): Promise<void> {
    if (this.running) throw new Error('ipamd already running on this node');
    this.starts++;
    if (this.mode === 'child') {
      this.child = await startIpamd({
        env: { ...this.env, INTROSPECTION_BIND_ADDRESS: '127.0.0.1:0' },
        logFile: path.join(this.dir, 'ipamd.log'),
        ...(this.childPrefix ? { prefix: this.childPrefix } : {}),
      });
      this.port = this.child.introspectionPort;
      return;
    }
    // Port 0: the kernel picks a free port at bind, so many daemons starting together
    // (the fleet bench, in several threads) never race for one a picker found free.
    const config = loadConfig({ ...this.env, INTROSPECTION_BIND_ADDRESS: '127.0.0.1:0' });
    // With ENI_IPAM_KEEP_NODE_DIR=1 the in-process daemon logs (debug) to <dir>/ipamd.log, kept for a post-mortem.
    const log =
      process.env.ENI_IPAM_KEEP_NODE_DIR === '1'
        ? pino(
            { level: 'debug', base: { component: 'ipamd' }, timestamp: pino.stdTimeFunctions.isoTime },
            pino.destination({ dest: path.join(this.dir, 'ipamd.log'), append: true, sync: false }),
          )
        : silent;
    this.daemon = await startDaemon(config, log);
    this.port = this.daemon.introspectionPort ?? 0;
  }

  /**
   * Stops ipamd: graceful (drain RPCs, flush the checkpoint), or with `crash` a SIGKILL
   * (child mode only; in-process it is graceful, there is no way to crash half a process).
   */
  async stop(p: { crash?: boolean; graceMs?: number } = {}): Promise<void> {
    const d = this.daemon;
    const c = this.child;
    this.daemon = undefined;
    this.child = undefined;
    if (d) await d.stop(p.graceMs ?? 5000);
    if (c) {
      if (p.crash) await c.kill9();
      else await c.stop(p.graceMs ?? 5000);
    }
  }

  /** `GET /v1/status` of the running ipamd. @throws Error when it is not running. */
  async status(): Promise<V1Status> {
    if (!this.running) throw new Error('ipamd is not running');
    return (await fetch(`http://127.0.0.1:${this.port}/v1/status`)).json();
  }

  /**
   * Stops ipamd (if running), the CRI stand-in, and removes the temp dir (kept, for its
   * ipamd.log and checkpoint, when ENI_IPAM_KEEP_NODE_DIR=1). Never throws.
   */
  async close(): Promise<void> {
    await this.stop().catch(() => undefined);
    await this.closeParts().catch(() => undefined);
  }
}

/**
 * Launches the instance, makes the temp dir and the CRI stand-in (the kit's {@link buildNode}),
 * in `o.sim` or in a new cloud (seed `o.seed`, one subnet of `o.subnetCidr`) that the node's
 * `close()` stops; ipamd is not started.
 * @throws what {@link buildNode} throws.
 */
export async function simNodeWithCloud(
  o: SimNodeOptions = {},
): Promise<{ sim: SimCloud; subnetId: string; node: SimNode }> {
  ensureDummyAwsCredentials();
  const k = await buildNode({
    ...(o.sim ? { sim: o.sim } : { simOptions: o.seed === undefined ? {} : { seed: o.seed } }),
    ...(o.subnetId ? { subnetId: o.subnetId } : {}),
    ...(o.subnetCidr ? { subnetCidr: o.subnetCidr } : {}),
    instanceType: o.instanceType ?? 'm5.large',
    dirPrefix: 'eni-ipam-node-',
    keepDir: process.env.ENI_IPAM_KEEP_NODE_DIR === '1',
    ...(o.cri === false ? {} : { cri: {} }),
  });
  const node = new SimNode(k.sim, k.instanceId, k.dir, o.mode ?? 'in-process', k.cri, o.env ?? {}, k.close);
  return { sim: k.sim, subnetId: k.subnetId, node };
}

/** {@link simNodeWithCloud}'s node alone (the cloud is `o.sim`, or a new one its `close()` stops). */
export async function createSimNode(o: SimNodeOptions = {}): Promise<SimNode> {
  return (await simNodeWithCloud(o)).node;
}

/**
 * For a test: {@link simNodeWithCloud} with its cloud and node closed by `t.after` even
 * when the test fails; ipamd not started. An own cloud is stopped before ipamd (as these
 * tests always did), so ipamd's graceful stop does not wait for EC2 calls in flight.
 */
export async function testSimNode(
  t: { after(fn: () => unknown): void },
  o: SimNodeOptions = {},
): Promise<{ sim: SimCloud; subnetId: string; node: SimNode }> {
  const r = await simNodeWithCloud(o);
  if (!o.sim) t.after(() => r.sim.stop()); // stopping it again in node.close() is a no-op
  t.after(() => r.node.close());
  return r;
}

/**
 * For a test: a simulated cloud (seed `seed`) with one subnet (`cidr`, default
 * 10.0.0.0/24) and a node on it whose ipamd is started ({@link testSimNode}); the cloud
 * and the node are stopped by `t.after` even when the test fails.
 * @throws what {@link simNodeWithCloud} or {@link SimNode.start} throws.
 */
export async function startedSimNode(
  t: { after(fn: () => unknown): void },
  seed: number,
  o: Omit<SimNodeOptions, 'sim' | 'subnetId' | 'seed' | 'subnetCidr'> & { cidr?: string } = {},
): Promise<{ sim: SimCloud; node: SimNode }> {
  const { cidr, ...opts } = o;
  const { sim, node } = await testSimNode(t, { ...opts, seed, ...(cidr ? { subnetCidr: cidr } : {}) });
  await node.start();
  return { sim, node };
}
