#!/usr/bin/env node
/**
 * `npm run demo` (README command one): the main job end to end on real parts.
 *
 *   node dist/demo/main.js [--pods N] [--instance-type TYPE] [--daemon] [--node-ns NAME]
 *
 * It creates the network namespace that stands for the node, re-executes itself inside
 * it (`nsenter --net`, network namespace only), runs the scenario there, and removes the
 * namespace on exit, whatever happened. Extra ipamd settings pass through the
 * environment (e.g. `WARM_IP_TARGET=5 npm run demo`).
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createNamedNetns } from '../kit/netns.js';
import { runScenario } from './scenario.js';

const IPAMD_ENV =
  /^(WARM_|MINIMUM_IP_TARGET|MAX_ENI|IP_COOLDOWN_PERIOD|ENABLE_PREFIX_DELEGATION|AWS_VPC_|ENI_IPAM_|CLUSTER_NAME|ADDITIONAL_ENI_TAGS)/;

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      pods: { type: 'string', default: '8' },
      'instance-type': { type: 'string', default: 'm5.large' },
      daemon: { type: 'boolean', default: false },
      'node-ns': { type: 'string', default: 'eni-demo-node' },
      inside: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.help) {
    process.stdout.write('usage: npm run demo -- [--pods N] [--instance-type m5.large] [--daemon]\n');
    return 0;
  }
  const pods = Number(values.pods);
  if (!Number.isInteger(pods) || pods < 1 || pods > 200) {
    process.stderr.write(`demo: --pods must be a whole number from 1 to 200, got "${values.pods}"\n`);
    return 2;
  }
  if (values.inside) {
    const ipamdEnv = Object.fromEntries(Object.entries(process.env).filter(([k]) => IPAMD_ENV.test(k)));
    return runScenario({
      pods,
      instanceType: values['instance-type']!,
      daemon: values.daemon!,
      ipamdEnv,
      print: (l) => process.stdout.write(l + '\n'),
    });
  }
  if (process.getuid?.() !== 0) {
    process.stderr.write('demo: network namespaces need root; run it as root (sudo npm run demo)\n');
    return 2;
  }
  const node = await createNamedNetns(values['node-ns']!);
  process.stdout.write(`node network namespace: ${node.path}\n`);
  try {
    const self = fileURLToPath(import.meta.url);
    const args = [
      '--pods',
      String(pods),
      '--instance-type',
      values['instance-type']!,
      ...(values.daemon ? ['--daemon'] : []),
      '--inside',
    ];
    const child = spawn('nsenter', [`--net=${node.path}`, process.execPath, self, ...args], { stdio: 'inherit' });
    const forward = (sig: NodeJS.Signals) => child.kill(sig);
    process.on('SIGINT', forward);
    process.on('SIGTERM', forward);
    return await new Promise<number>((resolve) => child.on('exit', (code) => resolve(code ?? 1)));
  } finally {
    await node.remove();
  }
}

main().then(
  (code) => process.exit(code),
  (e: Error) => {
    process.stderr.write(`demo failed: ${e.stack ?? e.message}\n`);
    process.exit(1);
  },
);
