/** `eni-ipam plan`: the pool controller's next step and why, without doing it. */
import type { CommandModule } from 'yargs';
import { fetchStatus } from '../ipamd-api.js';
import { globalOptions } from '../options.js';
import { print, emit } from '../output.js';
import { planFromStatus } from '../plan.js';

/** `plan`: {@link planFromStatus} on `/v1/status`; changes nothing. */
export const planCommand: CommandModule = {
  command: 'plan',
  describe: 'what the pool controller would do next and why (binding target, limit), without doing it',
  handler: async (argv) => {
    const o = globalOptions(argv);
    const st = await fetchStatus(o);
    const p = planFromStatus(st, Date.now());
    if (o.output === 'json' || o.output === 'yaml') return emit(o.output, p);
    const c = p.counts;
    print(
      [
        `pool (${c.mode}): total ${c.total}, assigned ${c.assigned}, available ${c.available}, cooling ${c.cooling}, short ${c.short}, over ${c.over}`,
        `targets: ${p.targets}`,
        `binding: ${p.binding}`,
        `limit: ${p.limit}`,
        'next:',
        ...p.actions.map((a) => `  - ${a}`),
      ].join('\n'),
    );
  },
};
