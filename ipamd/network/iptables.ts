/**
 * iptables for ipamd's host networking (docs/design.md#7-host-networking): which backend (nf_tables or legacy
 * x_tables) the node uses, and idempotent helpers on top of it. Every call passes
 * `-w <seconds>`: the xtables lock is shared with kube-proxy and other agents, and an
 * unbounded wait would hang ipamd, while no wait fails at once when the lock is held.
 * Facts: iptables 1.8.x (`iptables(8)`, `iptables-restore(8)`); both backends can hold
 * rules at the same time, and the kernel evaluates both, so rules must go into the
 * backend the rest of the node (kube-proxy) uses.
 */
import { CommandError, type CommandRunner } from './runner.js';

/** The two iptables backends of iptables ≥ 1.8. */
export type IptablesBackend = 'nft' | 'legacy';

/** Default bounded wait for the xtables lock, in seconds. */
export const DEFAULT_LOCK_WAIT_S = 5;

/** The capability reading each backend needs: nf_tables is read over netlink, x_tables through a raw socket. */
const READ_CAPABILITY: Record<string, string> = {
  'iptables-nft-save': 'NET_ADMIN',
  'iptables-legacy-save': 'NET_RAW',
};

/**
 * Number of rules (`-A` lines) `<binary>-save` prints, or -1 when the binary is missing or
 * fails.
 * @throws Error naming the capability when it is refused permission (nf_tables: NET_ADMIN;
 *   x_tables: NET_RAW, refused only once its tables hold rules, e.g. Amazon Linux 2's
 *   kube-proxy's): guessing the other backend then would put ipamd's rules where
 *   kube-proxy's are not.
 */
async function countRules(runner: CommandRunner, save: string): Promise<number> {
  try {
    const { stdout } = await runner.run(save, []);
    return stdout.split('\n').filter((l) => l.startsWith('-A ')).length;
  } catch (e) {
    if (e instanceof CommandError && /Permission denied/.test(e.stderr))
      throw new Error(
        `cannot tell which iptables backend the node uses: ${save} was refused (${e.stderr.trim().split('\n')[0]}); reading it needs the ${READ_CAPABILITY[save] ?? 'NET_ADMIN'} capability (chart securityContext.capabilities.add)`,
      );
    return -1;
  }
}

/**
 * Picks the backend the node already uses: the one whose `-save` lists more rules
 * (kube-proxy's, typically); on a tie (e.g. both empty), the `iptables` default as
 * `iptables -V` reports it (`(nf_tables)` → nft, `(legacy)` → legacy).
 * @throws Error when neither `iptables-nft` nor `iptables-legacy` can be run, or one was
 *   refused permission (naming NET_ADMIN or NET_RAW: see countRules).
 */
export async function detectIptablesBackend(runner: CommandRunner): Promise<IptablesBackend> {
  const [nft, legacy] = await Promise.all([
    countRules(runner, 'iptables-nft-save'),
    countRules(runner, 'iptables-legacy-save'),
  ]);
  if (nft < 0 && legacy < 0)
    throw new Error('neither iptables-nft-save nor iptables-legacy-save can be run: install iptables ≥ 1.8');
  if (nft !== legacy) return nft > legacy ? 'nft' : 'legacy';
  const { stdout } = await runner.run('iptables', ['-V']).catch(() => ({ stdout: '' }));
  return /legacy/.test(stdout) ? 'legacy' : 'nft';
}

/** One backend of iptables (IPv4), reached through `runner`. Methods are idempotent where named `ensure*`/`delete*`. */
export class Iptables {
  /** The binary, `iptables-nft` or `iptables-legacy`. */
  readonly bin: string;

  /**
   * @param runner runs the commands (optionally inside a netns).
   * @param backend which backend to write to (see {@link detectIptablesBackend}).
   * @param lockWaitS bounded wait for the xtables lock, seconds (`-w`), default 5.
   */
  constructor(
    private readonly runner: CommandRunner,
    readonly backend: IptablesBackend,
    private readonly lockWaitS = DEFAULT_LOCK_WAIT_S,
  ) {
    this.bin = `iptables-${backend}`;
  }

  /** Runs `iptables-<backend> -w <s> -t <table> <args>`. @returns stdout. @throws CommandError */
  async exec(table: string, args: string[]): Promise<string> {
    return (await this.runner.run(this.bin, ['-w', String(this.lockWaitS), '-t', table, ...args])).stdout;
  }

  /** True if `chain` exists in `table` (`-S <chain>` succeeds). */
  async chainExists(table: string, chain: string): Promise<boolean> {
    try {
      await this.exec(table, ['-S', chain]);
      return true;
    } catch (e) {
      if (e instanceof CommandError) return false;
      throw e;
    }
  }

  /** Creates `chain` in `table` unless it exists. @throws CommandError for other failures. */
  async ensureChain(table: string, chain: string): Promise<void> {
    if (await this.chainExists(table, chain)) return;
    try {
      await this.exec(table, ['-N', chain]);
    } catch (e) {
      if (!(e instanceof CommandError && /already exists/i.test(e.stderr))) throw e;
    }
  }

  /**
   * True if the rule `spec` (match and target arguments, as given to `-A`) is in `chain`
   * (`-C`, exit status 1 = absent). @throws CommandError for other failures (e.g. lock timeout).
   */
  async hasRule(table: string, chain: string, spec: string[]): Promise<boolean> {
    try {
      await this.exec(table, ['-C', chain, ...spec]);
      return true;
    } catch (e) {
      if (e instanceof CommandError && e.exitCode === 1) return false;
      throw e;
    }
  }

  /**
   * Adds `spec` to `chain` unless an identical rule is there (`-C` before adding): at
   * 1-based `position` with `-I` when given, else appended with `-A`.
   * @returns true if it added the rule. @throws CommandError
   */
  async ensureRule(table: string, chain: string, spec: string[], position?: number): Promise<boolean> {
    if (await this.hasRule(table, chain, spec)) return false;
    await this.exec(table, position === undefined ? ['-A', chain, ...spec] : ['-I', chain, String(position), ...spec]);
    return true;
  }

  /** Deletes every copy of `spec` from `chain` (none is fine). @returns how many were deleted. @throws CommandError */
  async deleteRule(table: string, chain: string, spec: string[]): Promise<number> {
    let n = 0;
    while (await this.hasRule(table, chain, spec)) {
      await this.exec(table, ['-D', chain, ...spec]);
      n++;
    }
    return n;
  }

  /** Flushes and deletes `chain` if it exists (no rule may jump to it any more). @throws CommandError */
  async deleteChain(table: string, chain: string): Promise<void> {
    if (!(await this.chainExists(table, chain))) return;
    await this.exec(table, ['-F', chain]);
    await this.exec(table, ['-X', chain]);
  }

  /**
   * Applies `rules` (iptables-restore format: `*table`, chain declarations, `-A` lines,
   * `COMMIT`) with `--noflush`: only the chains declared with `:<chain> - [0:0]` are
   * flushed and refilled, in one commit per table (atomic for both backends).
   * @throws CommandError with iptables-restore's message.
   */
  async restoreNoflush(rules: string): Promise<void> {
    await this.runner.run(`${this.bin}-restore`, ['-w', String(this.lockWaitS), '--noflush'], rules);
  }

  /** `iptables-<backend>-save -t <table>` output. @throws CommandError */
  async save(table: string): Promise<string> {
    return (await this.runner.run(`${this.bin}-save`, ['-t', table])).stdout;
  }
}
