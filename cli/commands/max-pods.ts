/** `eni-ipam max-pods`: amazon-vpc-cni-k8s's max-pods formula over our instance limits table. */
import type { CommandModule } from 'yargs';
import { maxPods } from '../max-pods.js';
import { print, printJson } from '../output.js';

/** `max-pods`: {@link maxPods}; exit 2 for an unknown instance type. */
export const maxPodsCommand: CommandModule = {
  command: 'max-pods',
  describe: 'max pods for an instance type, amazon-vpc-cni-k8s formula',
  builder: (y) =>
    y
      .option('instance-type', { type: 'string', demandOption: true, describe: 'EC2 instance type, e.g. m5.large' })
      .option('prefix-delegation', {
        type: 'boolean',
        default: false,
        describe: 'ENABLE_PREFIX_DELEGATION=true: /28 prefixes per slot',
      })
      .option('custom-networking', {
        type: 'boolean',
        default: false,
        describe: 'custom networking (ENIConfig): the primary ENI serves no pod',
      })
      .option('max-pods-cap', { type: 'string', describe: "upper bound applied last (e.g. 110, kubelet's default)" }),
  handler: async (argv) => {
    const r = maxPods({
      instanceType: String(argv['instance-type']),
      prefixDelegation: argv['prefix-delegation'] === true,
      customNetworking: argv['custom-networking'] === true,
      ...(argv['max-pods-cap'] !== undefined ? { cap: String(argv['max-pods-cap']) } : {}),
    });
    if (argv.output === 'json') return printJson(r);
    print(`${r.instanceType}: max pods ${r.maxPods} (${r.explain})`);
  },
};
