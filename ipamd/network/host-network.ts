/**
 * ipamd's host networking (docs/design.md#7-host-networking), the one object the daemon calls:
 * - {@link HostNetwork.setupNode} at start: sysctls checked (not set), SNAT chain (or its removal with
 *   external SNAT), the NodePort connection mark (connmark.ts, or its removal), and the node rules sending traffic that leaves the VPC to the main
 *   table (primary ENI, where it is SNATed) — see netfacts/routing.ts;
 * - {@link HostNetwork.setupEni} at start for every attached secondary ENI and after an
 *   ENI is attached; {@link HostNetwork.teardownEni} before a secondary ENI is detached.
 * Every step converges to the desired state, so calling again (restart, retry) is safe.
 * Calls are serialised: one runs at a time, in call order.
 * Pod rules (priorities 512/1536) are written by the CNI plugin, not here.
 */
import type { Logger } from '../log.js';
import { findLinkByMac, setupEniLink, teardownEniLink, type EniLinkSpec } from './eni-links.js';
import { syncRules, type IpRule } from './ip-rules.js';
import { detectIptablesBackend, Iptables, DEFAULT_LOCK_WAIT_S, type IptablesBackend } from './iptables.js';
import {
  MAIN_TABLE,
  NON_VPC_MAIN_PRIORITY,
  VPC_GOTO_PRIORITY,
  VPC_GOTO_TARGET_PRIORITY,
} from '../../netfacts/routing.js';
import { CommandRunner } from './runner.js';
import { applySnat, type SnatRandomize } from './snat.js';
import { applyConnmark } from './connmark.js';
import { DEFAULT_CONNMARK } from '../../netfacts/connmark.js';
import { checkNodeSysctls, type SysctlCheck } from './sysctl.js';

/** Options of {@link HostNetwork}. */
export interface HostNetworkOptions {
  /** false → every method is a logged no-op (ipamd tests without networking, the demo). Default true. */
  enabled?: boolean;
  /** Network namespace (path) standing for the node, for tests. Unset in production. */
  netns?: string;
  /** AWS_VPC_ENI_MTU: MTU of secondary ENI links, bytes. */
  eniMtu: number;
  /** AWS_VPC_K8S_CNI_EXTERNALSNAT. */
  externalSnat: boolean;
  /** AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS. */
  excludeSnatCidrs: string[];
  /** AWS_VPC_K8S_CNI_RANDOMIZESNAT (default `prng`: `--random-fully`). */
  randomizeSnat?: SnatRandomize;
  /** AWS_VPC_CNI_NODE_PORT_SUPPORT: install the connection-mark rules (connmark.ts). Default true. */
  nodePortSupport?: boolean;
  /** AWS_VPC_K8S_CNI_CONNMARK: the mark bit(s) (default 0x80). */
  connmark?: number;
  /** AWS_VPC_K8S_CNI_VETHPREFIX (default `eni`). */
  vethPrefix?: string;
  /** Told after each connection-mark reconcile (`awscni_connmark_reconcile_total{result}`). */
  onConnmarkReconcile?: (result: 'success' | 'error') => void;
  /** Force an iptables backend instead of detecting it. */
  iptablesBackend?: IptablesBackend;
  /** Bounded xtables lock wait, seconds (default 5). */
  lockWaitS?: number;
  /** How long setupEni waits for a new ENI's link to appear, ms (default 10 000). */
  linkWaitMs?: number;
  log?: Logger;
}

/** Node-wide facts for {@link HostNetwork.setupNode}. Give `primaryIf` or `primaryMac`. */
export interface NodeNetworkSpec {
  /** Name of the primary ENI's interface (e.g. `eth0`, `ens5`). */
  primaryIf?: string;
  /** MAC of the primary ENI (IMDS `mac`), used to find the interface when `primaryIf` is unset. */
  primaryMac?: string;
  /** Primary private IPv4 of the node: the SNAT source. */
  nodeIp: string;
  /** VPC IPv4 CIDRs (IMDS `vpc-ipv4-cidr-blocks`). */
  vpcCidrs: string[];
}

/** The ENI as the datastore knows it; primary ENIs are skipped. */
export type HostEni = EniLinkSpec & { isPrimary?: boolean };

/**
 * The node rules for the VPC/excluded `cidrs` when SNAT is done on the node: VPC-bound
 * traffic jumps over the `lookup main` rule to the pod/ENI rules; all else uses main.
 * Empty with external SNAT (pod traffic then always leaves through the pod's ENI).
 */
export function nodeRules(cidrs: string[], externalSnat: boolean): IpRule[] {
  if (externalSnat) return [];
  return [
    ...[...new Set(cidrs)].map((c) => ({ priority: VPC_GOTO_PRIORITY, to: c, goto: VPC_GOTO_TARGET_PRIORITY })),
    { priority: NON_VPC_MAIN_PRIORITY, table: MAIN_TABLE },
    { priority: VPC_GOTO_TARGET_PRIORITY, nop: true },
  ];
}

const NODE_RULE_PRIORITIES = new Set([VPC_GOTO_PRIORITY, NON_VPC_MAIN_PRIORITY, VPC_GOTO_TARGET_PRIORITY]);

/** Host networking of one node. */
export class HostNetwork {
  readonly runner: CommandRunner;
  private readonly enabled: boolean;
  private iptables: Iptables | undefined;
  private queue: Promise<unknown> = Promise.resolve();

  constructor(private readonly o: HostNetworkOptions) {
    this.enabled = o.enabled ?? true;
    this.runner = new CommandRunner(o.netns ? { netns: o.netns } : {});
  }

  /** The iptables backend in use (detected on first use, then fixed). @throws CommandError, Error */
  async ipt(): Promise<Iptables> {
    if (!this.iptables) {
      const backend = this.o.iptablesBackend ?? (await detectIptablesBackend(this.runner));
      this.iptables = new Iptables(this.runner, backend, this.o.lockWaitS ?? DEFAULT_LOCK_WAIT_S);
      this.o.log?.info({ backend }, 'iptables backend');
    }
    return this.iptables;
  }

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.queue.then(fn, fn);
    this.queue = next.catch(() => undefined);
    return next;
  }

  /**
   * Node-wide setup: checks (never sets) `ip_forward` and the primary interface's
   * `rp_filter` (sysctl.ts: the privileged init container sets them), then the SNAT
   * chain (removed with external SNAT) and the node rules of {@link nodeRules}.
   * @returns the sysctl checks (empty when host networking is off) and the primary interface.
   * @throws Error when the primary interface cannot be found; CommandError when a tool fails.
   */
  setupNode(spec: NodeNetworkSpec): Promise<{ primaryIf?: string; sysctls: SysctlCheck[] }> {
    if (!this.enabled) return Promise.resolve({ sysctls: [] });
    return this.serial(async () => {
      let primaryIf = spec.primaryIf;
      if (!primaryIf) {
        if (!spec.primaryMac) throw new Error('setupNode needs primaryIf or primaryMac');
        primaryIf = (await findLinkByMac(this.runner, spec.primaryMac))?.ifname;
        if (!primaryIf) throw new Error(`no interface has the primary ENI's MAC ${spec.primaryMac}`);
      }
      const sysctls = await checkNodeSysctls(this.runner, primaryIf);
      const ipt = await this.ipt();
      await applySnat(ipt, {
        nodeIp: spec.nodeIp,
        vpcCidrs: spec.vpcCidrs,
        excludeCidrs: this.o.excludeSnatCidrs,
        externalSnat: this.o.externalSnat,
        randomize: this.o.randomizeSnat ?? 'prng',
      });
      const connmarkChanges = await this.reconcileConnmark(ipt, primaryIf);
      const changed = await syncRules(
        this.runner,
        (r) => NODE_RULE_PRIORITIES.has(r.priority),
        nodeRules([...spec.vpcCidrs, ...this.o.excludeSnatCidrs], this.o.externalSnat),
      );
      this.o.log?.info(
        {
          primaryIf,
          nodeIp: spec.nodeIp,
          vpcCidrs: spec.vpcCidrs,
          externalSnat: this.o.externalSnat,
          backend: ipt.backend,
          ruleChanges: changed,
          nodePortSupport: this.o.nodePortSupport ?? true,
          connmarkChanges,
        },
        'node host networking applied',
      );
      return { primaryIf, sysctls };
    });
  }

  /** Applies (or, without NodePort support, removes) the connection-mark rules, counting the outcome. @throws CommandError */
  private async reconcileConnmark(ipt: Iptables, primaryIf: string): Promise<number> {
    const spec =
      (this.o.nodePortSupport ?? true)
        ? { primaryIf, vethPrefix: this.o.vethPrefix ?? 'eni', mark: this.o.connmark ?? DEFAULT_CONNMARK }
        : undefined;
    try {
      const n = await applyConnmark(ipt, this.runner, spec);
      this.o.onConnmarkReconcile?.('success');
      return n;
    } catch (e) {
      this.o.onConnmarkReconcile?.('error');
      throw e;
    }
  }

  /** Re-reads the node sysctls ({@link checkNodeSysctls}) for `primaryIf`. Never throws. */
  checkSysctls(primaryIf: string): Promise<SysctlCheck[]> {
    return checkNodeSysctls(this.runner, primaryIf);
  }

  /**
   * Sets up a secondary ENI's link, address, route table (device+1) and rule. No-op for
   * the primary ENI (device 0). Re-run safe.
   * @throws Error when its link does not appear within `linkWaitMs`; CommandError when `ip` fails.
   */
  setupEni(eni: HostEni): Promise<void> {
    if (!this.enabled || eni.isPrimary || eni.deviceNumber === 0) return Promise.resolve();
    return this.serial(async () => {
      const r = await setupEniLink(this.runner, eni, this.o.eniMtu, this.o.linkWaitMs ?? 10_000);
      this.o.log?.info(
        { eniId: eni.eniId, deviceNumber: eni.deviceNumber, ifName: r.ifName, changes: r.changes },
        'ENI host networking applied',
      );
    });
  }

  /** Removes a secondary ENI's table, rule and address (call before detaching it). Re-run safe. @throws CommandError */
  teardownEni(eni: HostEni): Promise<void> {
    if (!this.enabled || eni.isPrimary || eni.deviceNumber === 0) return Promise.resolve();
    return this.serial(async () => {
      const n = await teardownEniLink(this.runner, eni);
      this.o.log?.info(
        { eniId: eni.eniId, deviceNumber: eni.deviceNumber, commands: n },
        'ENI host networking removed',
      );
    });
  }
}
