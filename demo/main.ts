#!/usr/bin/env node
/**
 * `npm run demo` (README command one): the main job end to end on real parts.
 *
 *   node dist/demo/main.js [--pods N] [--instance-type TYPE] [--daemon] [--ns-prefix NAME]
 *
 * It creates the network namespace that stands for the node (`<prefix>-node`), re-executes
 * itself inside it (`nsenter --net`, network namespace only), runs the scenario there
 * (./scenario.ts: the VPC namespace `<prefix>-vpc`, pods `<prefix>-pod-<i>`, …), and removes
 * every namespace of the prefix on exit, whatever happened: the scenario removes what it
 * made, on SIGINT/SIGTERM too, and this process removes whatever a scenario that died left.
 * Extra ipamd settings pass through the environment (e.g. `WARM_IP_TARGET=5 npm run demo`).
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createNamedNetns, run, type Netns } from '../kit/netns.js';
import { runScenario } from './scenario.js';

const IPAMD_ENV =
  /^(WARM_|MINIMUM_IP_TARGET|MAX_ENI|IP_COOLDOWN_PERIOD|ENABLE_PREFIX_DELEGATION|AWS_VPC_|ENI_IPAM_|CLUSTER_NAME|ADDITIONAL_ENI_TAGS)/;
/** Default pods: more than an m5.large's primary ENI holds (9 secondary IPs), so some land on a secondary ENI. */
const DEFAULT_PODS = '12';
const NS_PREFIX = /^[A-Za-z0-9][A-Za-z0-9_-]{0,39}$/;

const USAGE = 'usage: npm run demo -- [--pods N] [--instance-type m5.large] [--daemon] [--ns-prefix eni-demo]\n';

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      pods: { type: 'string', default: DEFAULT_PODS },
      'instance-type': { type: 'string', default: 'm5.large' },
      daemon: { type: 'boolean', default: false },
      'ns-prefix': { type: 'string', default: 'eni-demo' },
      inside: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.help) {
    process.stdout.write(USAGE);
    return 0;
  }
  const pods = Number(values.pods);
  if (!Number.isInteger(pods) || pods < 1 || pods > 200) {
    process.stderr.write(`demo: --pods must be a whole number from 1 to 200, got "${values.pods}"\n`);
    return 2;
  }
  const prefix = values['ns-prefix']!;
  if (!NS_PREFIX.test(prefix)) {
    process.stderr.write(
      `demo: --ns-prefix must be 1 to 40 letters, digits, "-" or "_" starting with a letter or digit, got "${prefix}"\n`,
    );
    return 2;
  }
  if (values.inside) return inside(pods, values['instance-type']!, values.daemon!, prefix);
  if (process.getuid?.() !== 0) {
    process.stderr.write('demo: network namespaces need root; run it as root (sudo npm run demo)\n');
    return 2;
  }
  const node = await createNamedNetns(`${prefix}-node`);
  process.stdout.write(`node network namespace: ${node.path}\n`);
  let group: number | undefined;
  try {
    const self = fileURLToPath(import.meta.url);
    const args = ['--pods', String(pods), '--instance-type', values['instance-type']!, '--ns-prefix', prefix];
    if (values.daemon) args.push('--daemon');
    // The scenario leads a process group of its own, which ipamd and the VPC peer's server join:
    // if it dies without its teardown (SIGKILL, a crash), what it started is killed below.
    const child = spawn('nsenter', [`--net=${node.path}`, process.execPath, self, ...args, '--inside'], {
      stdio: 'inherit',
      detached: true,
    });
    group = child.pid;
    // Ctrl-C (the terminal's process group is this one only), SIGTERM and SIGHUP are passed on.
    const forward = (sig: NodeJS.Signals) => child.kill(sig);
    for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(sig, forward);
    return await new Promise<number>((resolve) =>
      child.on('exit', (code, sig) => resolve(code ?? (sig === 'SIGINT' ? 130 : 1))),
    );
  } finally {
    killGroup(group);
    await removeLeftovers(prefix, node);
  }
}

/** The scenario, in the node namespace; SIGINT/SIGTERM abort it (it removes what it made and exits 130). */
async function inside(pods: number, instanceType: string, daemon: boolean, prefix: string): Promise<number> {
  const ipamdEnv = Object.fromEntries(Object.entries(process.env).filter(([k]) => IPAMD_ENV.test(k)));
  const abort = new AbortController();
  // Ctrl-C is passed on by the outer process (a second signal changes nothing: aborted once).
  const stop = () => abort.abort(new Error('interrupted'));
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  const name = `${prefix}-node`;
  const node: Netns = { name, path: `/var/run/netns/${name}`, shape: 'named', remove: async () => undefined };
  return runScenario({
    pods,
    instanceType,
    daemon,
    ipamdEnv,
    node,
    nsPrefix: prefix,
    signal: abort.signal,
    print: (l) => process.stdout.write(l + '\n'),
  });
}

/**
 * SIGKILLs what is left of the scenario's process group `pgid` (ipamd, the VPC peer's server)
 * once the scenario has exited: nothing after a scenario that tore down, and what a killed or
 * crashed one left. Never throws (ESRCH: nothing left).
 */
function killGroup(pgid: number | undefined): void {
  if (pgid === undefined) return;
  try {
    process.kill(-pgid, 'SIGKILL');
    process.stdout.write(`killed the processes the scenario left (process group ${pgid})\n`);
  } catch {
    // ESRCH: the scenario left no process.
  }
}

/**
 * Removes the node namespace and every other named namespace of the demo's prefix
 * (`<prefix>-vpc`, `<prefix>-pod-<i>`) still there: only a scenario that died before its
 * teardown leaves any, and then this says so. Never throws.
 */
async function removeLeftovers(prefix: string, node: Netns): Promise<void> {
  const ours = new RegExp(`^${prefix}-(vpc|pod-\\d+)$`);
  const names = (await run('ip', ['netns', 'list']).catch(() => ''))
    .split('\n')
    .map((l) => l.split(' ')[0]!)
    .filter((n) => ours.test(n));
  for (const n of names) await run('ip', ['netns', 'delete', n]).catch(() => undefined);
  if (names.length) process.stdout.write(`removed namespaces the scenario left: ${names.join(' ')}\n`);
  await node.remove();
}

main().then(
  (code) => process.exit(code),
  (e: Error) => {
    process.stderr.write(`demo failed: ${e.stack ?? e.message}\n`);
    process.exit(1);
  },
);
