/**
 * `eni-ipam max-pods`: EKS's max-pods figure for an instance type (../max-pods.ts) over the
 * instance table (../instance-limits.ts). Without --instance-type it asks IMDS (this node's
 * type; AWS_EC2_METADATA_SERVICE_ENDPOINT as ipamd).
 */
import type { CommandModule } from 'yargs';
import { CliError, EXIT } from '../errors.js';
import { instanceTable } from '../instance-limits.js';
import { maxPods } from '../max-pods.js';
import { globalOptions } from '../options.js';
import { emit, print } from '../output.js';

/** This node's instance type from IMDS. @throws CliError (incomplete, 5) when IMDS does not answer. */
async function imdsInstanceType(timeoutMs: number): Promise<string> {
  const endpoint = process.env.AWS_EC2_METADATA_SERVICE_ENDPOINT || 'http://169.254.169.254';
  const { ImdsClient } = await import('../../ipamd/cloud/imds.js');
  const imds = new ImdsClient({ endpoint, timeoutMs: Math.min(timeoutMs, 2000) });
  try {
    return (await imds.get('meta-data/instance-type')).trim();
  } catch (e) {
    throw new CliError(
      `no --instance-type given and IMDS at ${endpoint} did not answer (${(e as Error).message}): pass --instance-type (e.g. m5.large) off a node`,
      EXIT.incomplete,
    );
  } finally {
    imds.close();
  }
}

/** `max-pods`: {@link maxPods}; exit 2 for an unknown instance type, 5 when IMDS is needed and silent. */
export const maxPodsCommand: CommandModule = {
  command: 'max-pods',
  describe: "max pods for an instance type as EKS computes it (this node's type from IMDS by default)",
  builder: (y) =>
    y
      .option('instance-type', { type: 'string', describe: 'EC2 instance type, e.g. m5.large (default: IMDS)' })
      .option('prefix-delegation', {
        type: 'boolean',
        default: false,
        describe: 'ENABLE_PREFIX_DELEGATION=true: /28 prefixes per slot (Nitro types)',
      })
      .option('custom-networking', {
        type: 'boolean',
        default: false,
        describe: 'custom networking (ENIConfig): the primary ENI serves no pod',
      })
      .option('eks-cap', {
        type: 'boolean',
        default: true,
        describe: "EKS's cap: 110 pods up to 30 vCPUs, 250 above (--no-eks-cap: the formula alone)",
      })
      .option('max-pods-cap', { type: 'string', describe: 'your own upper bound, applied last (e.g. 58)' }),
  handler: async (argv) => {
    const o = globalOptions(argv);
    const instanceType =
      argv['instance-type'] !== undefined ? String(argv['instance-type']) : await imdsInstanceType(o.timeoutMs);
    const r = maxPods(await instanceTable(), {
      instanceType,
      prefixDelegation: argv['prefix-delegation'] === true,
      customNetworking: argv['custom-networking'] === true,
      eksCap: argv['eks-cap'] !== false,
      ...(argv['max-pods-cap'] !== undefined ? { cap: String(argv['max-pods-cap']) } : {}),
    });
    if (o.output === 'json' || o.output === 'yaml') return emit(o.output, r);
    print(`${r.instanceType}: max pods ${r.maxPods} (${r.explain})`);
  },
};
