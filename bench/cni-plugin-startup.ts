/**
 * bench: start-up options of the CNI plugin, all in one run on one machine
 * (NODE_EXTRA_CA_CERTS unset). Six builds of the same plugin (scripts/bundle-plugin.mjs),
 * crossing three choices:
 *
 *   transport  `@grpc/grpc-js` (bench/variants/ipamd-client-grpc-js.ts) or `node:http2`
 *              with gRPC framing by hand (cni-plugin/grpc-http2.ts);
 *   codec      protobufjs/light reflection over the generated descriptor
 *              (bench/variants/ipamd-client-http2-light.ts) or the generated static
 *              codec (cni-plugin/generated/ipam-codec.ts, http2 only);
 *   V8 cache   the plain bundle, or run through the code-cache loader (loader/code-cache.ts).
 *
 * "grpc-js, protobufjs/light" is the bundle as it was before this bench; "http2,
 * generated codec + V8 cache" is what `npm run build` ships; all validate the config with
 * zod/mini. Each build is copied into its own temp dir (its code cache lives next to it,
 * produced by a warm-up ADD). Each round runs every build (rotating the order) for
 * VERSION, ADD into a fresh named netns and DEL, against the stand-in ipamd (grpc-js +
 * proto-loader, kit/cni-backend-standin.ts), inside a throw-away node netns; plus
 * `node -e 0`, the floor. Times (bench/timed-exec.ts) are wall ($EPOCHREALTIME) and CPU (user+sys) of the plugin
 * process and its children (`ip`, `nsenter`).
 *
 *   node dist/bench/cni-plugin-startup.js [--runs 20]
 */
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { createNamedNetns } from '../kit/netns.js';
import { startCniBackendStandIn } from '../kit/cni-backend-standin.js';
import { ms, summarize, timedExec, type TimedRun } from './timed-exec.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** One build of the plugin under test. */
interface Build {
  name: string;
  file: string;
  kib: number;
}

/** scripts/bundle-plugin.mjs's bundlePlugin (an .mjs script, so loaded untyped). */
type BundlePlugin = (o: {
  outfile: string;
  codeCache: boolean;
  ipamdClient?: string;
}) => Promise<{ outfile: string; bytes: number }>;

async function buildVariants(dir: string): Promise<Build[]> {
  const { bundlePlugin } = (await import(pathToFileURL(path.join(ROOT, 'scripts/bundle-plugin.mjs')).href)) as {
    bundlePlugin: BundlePlugin;
  };
  const grpcJs = path.join(ROOT, 'bench/variants/ipamd-client-grpc-js.ts');
  const light = path.join(ROOT, 'bench/variants/ipamd-client-http2-light.ts');
  const specs: Array<{ name: string; codeCache: boolean; ipamdClient?: string }> = [
    { name: 'grpc-js, protobufjs/light (the previous bundle)', codeCache: false, ipamdClient: grpcJs },
    { name: 'grpc-js, protobufjs/light + V8 cache', codeCache: true, ipamdClient: grpcJs },
    { name: 'http2, protobufjs/light', codeCache: false, ipamdClient: light },
    { name: 'http2, protobufjs/light + V8 cache', codeCache: true, ipamdClient: light },
    { name: 'http2, generated codec', codeCache: false },
    { name: 'http2, generated codec + V8 cache (shipped)', codeCache: true },
  ];
  const out: Build[] = [];
  for (const [i, s] of specs.entries()) {
    await mkdir(path.join(dir, `v${i}`));
    const r = await bundlePlugin({
      outfile: path.join(dir, `v${i}`, 'eni-ipam'),
      codeCache: s.codeCache,
      ...(s.ipamdClient ? { ipamdClient: s.ipamdClient } : {}),
    });
    out.push({ name: s.name, file: r.outfile, kib: Math.round(r.bytes / 1024) });
  }
  return out;
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { runs: { type: 'string', default: '20' } } });
  const runs = Number(values.runs);
  delete process.env.NODE_EXTRA_CA_CERTS;
  const work = await mkdtemp(path.join(os.tmpdir(), 'eni-ipam-startup-'));
  const standin = await startCniBackendStandIn();
  const node = await createNamedNetns(`eni-bench-su-${process.pid}`);
  const results = new Map<string, { version: TimedRun[]; add: TimedRun[]; del: TimedRun[] }>();
  const floor: TimedRun[] = [];
  let builds: Build[] = [];
  try {
    builds = await buildVariants(work);
    for (const b of builds) results.set(b.name, { version: [], add: [], del: [] });
    const config = JSON.stringify({
      cniVersion: '1.0.0',
      name: 'aws-cni',
      type: 'eni-ipam',
      ipamdSocket: standin.socket,
    });
    let seq = 0;
    const cycle = async (b: Build, record: boolean): Promise<void> => {
      const pod = await createNamedNetns(`eni-bench-su-pod-${process.pid}`);
      try {
        const env = {
          CNI_CONTAINERID: `bench${process.pid}x${seq++}`,
          CNI_NETNS: pod.path,
          CNI_IFNAME: 'eth0',
          CNI_PATH: '/opt/cni/bin',
          CNI_ARGS: `IgnoreUnknown=1;K8S_POD_NAMESPACE=bench;K8S_POD_NAME=p${seq}`,
        };
        const version = await timedExec([process.execPath, b.file], {
          env: { ...env, CNI_COMMAND: 'VERSION' },
          netns: node.path,
        });
        const add = await timedExec([process.execPath, b.file], {
          env: { ...env, CNI_COMMAND: 'ADD' },
          input: config,
          netns: node.path,
        });
        if (add.code !== 0) throw new Error(`${b.name} ADD failed: ${add.stdout}${add.stderr}`);
        const del = await timedExec([process.execPath, b.file], {
          env: { ...env, CNI_COMMAND: 'DEL' },
          input: config,
          netns: node.path,
        });
        if (del.code !== 0) throw new Error(`${b.name} DEL failed: ${del.stdout}${del.stderr}`);
        if (record) {
          const r = results.get(b.name)!;
          r.version.push(version);
          r.add.push(add);
          r.del.push(del);
        }
      } finally {
        await pod.remove();
      }
    };
    for (const b of builds) for (let w = 0; w < 2; w++) await cycle(b, false); // warm-up; the first ADD writes the V8 cache
    for (let i = 0; i < runs; i++) {
      for (let j = 0; j < builds.length; j++) await cycle(builds[(i + j) % builds.length]!, true);
      floor.push(await timedExec([process.execPath, '-e', '0']));
    }
  } finally {
    await node.remove();
    await standin.close();
    await rm(work, { recursive: true, force: true });
  }

  const wall = (xs: TimedRun[]) => summarize(xs.map((x) => x.wallMs));
  const cpu = (xs: TimedRun[]) => summarize(xs.map((x) => x.cpuMs));
  console.log(
    `CNI plugin start-up options, ${runs} rounds, ${new Date().toISOString().slice(0, 10)}, ${os.cpus().length} vCPU, Node ${process.version}, load ${os.loadavg()[0]!.toFixed(1)}`,
  );
  console.log(
    'wall/CPU in ms (median; p90 in parentheses); ADD/DEL against the stand-in ipamd, plugin run in a node netns\n',
  );
  console.log('| build | size KiB | VERSION wall | ADD wall | ADD CPU | DEL wall | DEL CPU |');
  console.log('|---|---|---|---|---|---|---|');
  for (const b of builds) {
    const r = results.get(b.name)!;
    const a = wall(r.add);
    const d = wall(r.del);
    console.log(
      `| ${b.name} | ${b.kib} | ${ms(wall(r.version).median)} | ${ms(a.median)} (${ms(a.p90)}) | ${ms(cpu(r.add).median)} | ${ms(d.median)} (${ms(d.p90)}) | ${ms(cpu(r.del).median)} |`,
    );
  }
  const f = wall(floor);
  console.log(`| \`node -e 0\` (floor) | – | ${ms(f.median)} (${ms(f.p90)}) | – | ${ms(cpu(floor).median)} | – | – |`);
}

main().then(
  () => process.exit(0),
  (e: Error) => {
    console.error(e.stack);
    process.exit(1);
  },
);
