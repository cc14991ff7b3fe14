/**
 * Start-up step of ipamd (called by `startDaemon` in ../daemon.ts): the node's ENIConfig
 * selection for custom networking (AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG). Off → always
 * `off`. On → an {@link EniConfigSource} watching this node (MY_NODE_NAME) and the
 * ENIConfigs with the same Kubernetes configuration as the pod source; without a node
 * name or a configuration the selection stays `unknown` (no ENI is ever created), with
 * the reason logged once.
 */
import type { IpamdConfig } from '../config.js';
import type { EniConfigSelection } from '../controller/eni-lifecycle/placement-types.js';
import { EniConfigSource, unreadableSelection } from '../eniconfig/source.js';
import { selectionBlock, type EniConfigBlock } from '../eniconfig/select.js';
import type { Logger } from '../log.js';
import { loadKubeConfig } from '../restore/kube-source-config.js';

/** The selection as the daemon uses it. */
export interface EniConfigWiring {
  /** The selection now (memory only). */
  current(): EniConfigSelection;
  /** Why no ENI may be created now, with its kind; undefined when creations are allowed (or custom networking is off). */
  block(): EniConfigBlock | undefined;
  /** `GET /v1/eni-configs`: the selected ENIConfig's name, or undefined (404) when off or not known. */
  name(): string | undefined;
  /** Calls `fn` on each change (must not throw). */
  onChange(fn: () => void): void;
  stop(): void;
}

/** Builds and starts the selection for `config` (never throws). */
export function startEniConfig(
  config: Pick<IpamdConfig, 'customNetworkCfg' | 'nodeName' | 'eniConfigLabelDef' | 'eniConfigAnnotationDef'>,
  log: Logger,
): EniConfigWiring {
  const keys = { labelDef: config.eniConfigLabelDef, annotationDef: config.eniConfigAnnotationDef };
  const fixed = (s: EniConfigSelection): EniConfigWiring => ({
    current: () => s,
    block: () => selectionBlock(s),
    name: () => (s.state !== 'off' ? s.name : undefined),
    onChange: () => undefined,
    stop: () => undefined,
  });
  if (!config.customNetworkCfg) return fixed({ state: 'off' });
  let why: string | undefined;
  let kc;
  if (!config.nodeName) why = 'MY_NODE_NAME is not set: custom networking cannot read the node';
  else
    try {
      kc = loadKubeConfig().kc;
    } catch (e) {
      why = `no Kubernetes configuration: ${(e as Error).message}`;
    }
  if (!kc || !config.nodeName) {
    const s = unreadableSelection(keys, why!);
    log.error({ reason: s.state === 'unknown' ? s.reason : '' }, 'custom networking: no ENI will be created');
    return fixed(s);
  }
  const source = new EniConfigSource({ kc, nodeName: config.nodeName, keys, log });
  log.info({ node: config.nodeName, ...keys }, 'custom networking on: watching the node and its ENIConfig');
  source.start();
  return {
    current: () => source.current(),
    block: () => selectionBlock(source.current()),
    name: () => {
      const s = source.current();
      return s.state !== 'off' ? s.name : undefined;
    },
    onChange: (fn) => source.onChange(fn),
    stop: () => source.stop(),
  };
}
