/**
 * A private containerd 1.6 with the CRI plugin for integration tests, standing for a
 * node's container runtime. All of its state (root, state, sockets, config, log) lives
 * under one base dir, and it runs inside a caller-created "node" network namespace
 * (entered with `nsenter --net=<path>` only: the mount namespace stays the host's, so
 * the `/var/run/netns/cni-*` pod netns it creates are visible to the test), so CNI
 * plugins it runs never touch the real host network.
 *
 * Facts this relies on (measured on Debian 12, containerd 1.6.20):
 * - `restrict_oom_score_adj = true` is required when root lacks CAP_SYS_RESOURCE,
 *   otherwise every RunPodSandbox fails with "can't get final child's PID from pipe".
 * - containerd passes its whole environment to CNI plugins, so NODE_EXTRA_CA_CERTS is
 *   removed from it (it slows every Node-based plugin start by ~130 ms).
 * - shim sockets (/run/containerd/s) and the runc root (/run/containerd/runc) are
 *   hard-coded outside the base dir: containerd runs in a mount namespace whose
 *   `/run/containerd` is a dir of its own under the base dir (the caller's, or one made
 *   here), so the machine's `/run/containerd` is never created, used or removed, and any
 *   number of these containerds (two CI runs, a cluster) share one machine.
 *
 * Needs the Debian packages containerd, runc, util-linux and gcc + libc6-dev
 * (`bash scripts/ensure-deps.sh --containerd` installs them).
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, openSync, statSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { CriTestClient } from './cri-client.js';
import { cleanUpContainerd, type ContainerdRun } from './containerd-stop.js';
import { k8sCgroupDirs } from './host-scan.js';
import { createNodeMountNs, type NodeMountNs } from './node-mountns.js';
import { buildPauseImage, type PauseImage } from './pause-image.js';

const run = promisify(execFile);
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Options of startContainerd. */
export interface ContainerdOptions {
  /** Directory holding everything of this containerd; created if missing, deleted by stop(). */
  baseDir: string;
  /** Node network namespace, `/var/run/netns/<name>`, created (and later deleted) by the caller. */
  nodeNetnsPath: string;
  /** CNI `bin_dir` (must contain `loopback` plus the plugins the conflist names). */
  cniBinDir: string;
  /** CNI `conf_dir`; the CRI plugin loads the first conflist by name and reloads on write/rename in it. */
  cniConfDir: string;
  /** containerd log level (default `info`). */
  logLevel?: string;
  /** Where the pause image tarball is cached (see buildPauseImage). */
  pauseCacheDir?: string;
  /** How long to wait for the CRI socket to answer, ms (default 30 000). */
  startTimeoutMs?: number;
  /**
   * A node mount namespace to run containerd in (see node-mountns.ts); it must bind
   * `/run/containerd`. Default: one made here, binding only `/run/containerd` (Node.js stays
   * visible: tests run the Node plugin through this containerd), closed by stop().
   */
  mountNs?: NodeMountNs;
}

/** A running private containerd. */
export interface Containerd {
  /** Absolute path of the gRPC socket (CRI runtime.v1 + containerd API). */
  socket: string;
  /** PID of the containerd process. */
  pid: number;
  /** containerd's stdout/stderr log. */
  logFile: string;
  /** The sandbox image it is pinned to. */
  pauseImage: PauseImage;
  /**
   * Removes every sandbox (CRI StopPodSandbox + RemovePodSandbox), kills containerd and
   * any shim it left, unmounts everything under baseDir, removes the pod netns mounts
   * its sandboxes used, deletes baseDir (with the mount namespace made for it) and the cgroups it created.
   * Idempotent; safe to call after a failed start.
   * @throws Error listing what could not be cleaned up.
   */
  stop(): Promise<void>;
}

/** Absolute path of `cmd` on PATH (plus the sbin dirs), or undefined. */
function which(cmd: string): string | undefined {
  const dirs = [...(process.env['PATH'] ?? '').split(':'), '/usr/sbin', '/sbin', '/usr/bin', '/bin'];
  for (const d of dirs) {
    const p = path.join(d, cmd);
    try {
      if (statSync(p).isFile()) return p;
    } catch {
      /* not here */
    }
  }
  return undefined;
}

/**
 * Throws a clear error if the containerd toolchain is missing.
 * @throws Error naming the missing commands and the script that installs them.
 */
export function assertContainerdTools(): void {
  const missing = ['containerd', 'containerd-shim-runc-v2', 'runc', 'ctr', 'nsenter', 'umount', 'gcc', 'tar'].filter(
    (c) => !which(c),
  );
  if (missing.length)
    throw new Error(`missing ${missing.join(', ')}: run \`bash scripts/ensure-deps.sh --containerd\` as root`);
}

/** containerd 1.6 config (schema version 2), everything under baseDir. */
function configToml(o: ContainerdOptions, socket: string, image: string): string {
  const q = (s: string): string => JSON.stringify(s);
  const b = o.baseDir;
  return `version = 2
root = ${q(path.join(b, 'root'))}
state = ${q(path.join(b, 'state'))}
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = ${q(socket)}
[ttrpc]
  address = ${q(`${socket}.ttrpc`)}
[debug]
  level = ${q(o.logLevel ?? 'info')}
[plugins."io.containerd.internal.v1.opt"]
  path = ${q(path.join(b, 'opt'))}
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = ${q(image)}
  # root may lack CAP_SYS_RESOURCE: clamp oom_score_adj to containerd's own.
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = ${q(o.cniBinDir)}
    conf_dir = ${q(o.cniConfDir)}
    max_conf_num = 1
`;
}

/** Settles when `child` exits or fails to spawn, calling `onExit` first (once per event, as the listeners fire). */
function exitOf(child: ChildProcess, onExit: () => void): Promise<void> {
  return new Promise<void>((resolve) => {
    child.once('exit', () => {
      onExit();
      resolve();
    });
    child.once('error', () => {
      onExit();
      resolve();
    });
  });
}

/**
 * Starts containerd (CRI plugin) inside the node netns and imports the pause image.
 * Waits until the CRI `Version` call answers on the socket.
 * @returns the running containerd; call `stop()` (e.g. in `t.after`) to remove it.
 * @throws Error (after cleaning up) if a tool is missing, containerd exits or does not
 *   answer within `startTimeoutMs`, or the image import fails; the message carries the
 *   tail of containerd's log.
 */
export async function startContainerd(o: ContainerdOptions): Promise<Containerd> {
  assertContainerdTools();
  if (!existsSync(o.nodeNetnsPath))
    throw new Error(`node netns ${o.nodeNetnsPath} does not exist (create it with ip netns add)`);
  const baseDir = path.resolve(o.baseDir);
  const socket = path.join(baseDir, 'containerd.sock');
  const logFile = path.join(baseDir, 'containerd.log');
  const pauseImage = await buildPauseImage(o.pauseCacheDir ? { cacheDir: o.pauseCacheDir } : {});
  for (const d of ['root', 'state', 'opt']) await mkdir(path.join(baseDir, d), { recursive: true });
  await writeFile(path.join(baseDir, 'config.toml'), configToml({ ...o, baseDir }, socket, pauseImage.ref));

  const cgroupsBefore = k8sCgroupDirs();
  const ownNs = o.mountNs
    ? undefined
    : await createNodeMountNs({
        root: path.join(baseDir, 'mnt'),
        binds: [{ nodePath: '/run/containerd' }],
        hideNode: false,
      });
  const mountNs = (o.mountNs ?? ownNs)!;
  const runcRoot = mountNs.hostPathOf('/run/containerd/runc/k8s.io');
  if (!runcRoot) {
    await ownNs?.close();
    throw new Error('the mount namespace given to startContainerd does not bind /run/containerd');
  }
  const env = { ...process.env };
  delete env['NODE_EXTRA_CA_CERTS'];
  const logFd = openSync(logFile, 'a');
  const child = spawn(
    'nsenter',
    [
      `--net=${o.nodeNetnsPath}`,
      `--mount=${mountNs.nsPath}`,
      'containerd',
      '--config',
      path.join(baseDir, 'config.toml'),
    ],
    {
      env,
      stdio: ['ignore', logFd, logFd],
      detached: true,
    },
  );
  closeSync(logFd);
  child.unref();
  const state: ContainerdRun = {
    baseDir,
    socket,
    pid: child.pid ?? -1,
    exited: false,
    exitP: exitOf(child, () => (state.exited = true)),
    cgroupsBefore,
    runcRoot,
    ...(ownNs ? { ownMountNs: ownNs } : {}),
    netnsSeen: new Set<string>(),
    netnsInodes: new Set<number>(),
  };
  const { pid } = state;

  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => (stopping ??= cleanUpContainerd(state));

  const fail = async (why: string): Promise<never> => {
    const log = await readFile(logFile, 'utf8').catch(() => '');
    await stop().catch(() => undefined);
    throw new Error(`${why}\n--- containerd.log (tail) ---\n${log.split('\n').slice(-25).join('\n')}`);
  };

  // Wait for the CRI plugin to answer.
  const deadline = Date.now() + (o.startTimeoutMs ?? 30_000);
  const cri = new CriTestClient(socket, 2000);
  try {
    for (;;) {
      if (state.exited)
        return await fail(`containerd exited during start (code ${child.exitCode}, signal ${child.signalCode})`);
      if (existsSync(socket)) {
        try {
          await cri.version();
          break;
        } catch {
          /* not ready yet */
        }
      }
      if (Date.now() > deadline)
        return await fail(`containerd did not answer CRI Version on ${socket} within ${o.startTimeoutMs ?? 30_000} ms`);
      await sleep(100); // the poll interval of this wait for CRI Version
    }
  } finally {
    cri.close();
  }

  try {
    await run('ctr', ['--address', socket, '-n', 'k8s.io', 'images', 'import', pauseImage.tarPath], { env });
  } catch (e) {
    return await fail(
      `ctr images import ${pauseImage.tarPath} failed: ${(e as { stderr?: string }).stderr ?? (e as Error).message}`,
    );
  }
  return { socket, pid, logFile, pauseImage, stop };
}
