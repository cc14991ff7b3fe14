/**
 * Start-up step of ipamd (called by `startDaemon` in ../daemon.ts): the node's ENIConfig
 * selection for custom networking (AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG). Off → always
 * `off`. On → an {@link EniConfigSource} watching this node (MY_NODE_NAME) and the
 * ENIConfigs with the same Kubernetes configuration as the pod source; without a node
 * name or a configuration the selection stays `unknown` (no ENI is ever created), with
 * the reason logged once. The Kubernetes client is imported only when custom networking
 * is on, and then in the background (~0.1 s of CPU that serving does not need): until it
 * has loaded, the selection is `unknown` (no ENI is created), as before the first read.
 */
import type { IpamdConfig } from '../config.js';
import type { EniConfigSelection } from '../controller/eni-lifecycle/placement-types.js';
import type { EniConfigSource } from '../eniconfig/source.js';
import { selectionBlock, type EniConfigBlock } from '../eniconfig/select.js';
import type { Logger } from '../log.js';

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
  const nodeName = config.nodeName;
  // Before the client has loaded: unknown, as before the first read (no ENI is created).
  let selection: EniConfigSelection = unknownSelection(keys, 'the Kubernetes client is still loading');
  let source: EniConfigSource | undefined;
  let stopped = false;
  const listeners: Array<() => void> = [];
  const set = (s: EniConfigSelection) => {
    selection = s;
    for (const fn of listeners) fn();
  };
  void (async () => {
    const [{ EniConfigSource, unreadableSelection }, { loadKubeConfig }] = await Promise.all([
      import('../eniconfig/source.js'),
      import('../kube/config.js'),
    ]);
    if (stopped) return;
    let why: string | undefined;
    let kc;
    if (!nodeName) why = 'MY_NODE_NAME is not set: custom networking cannot read the node';
    else
      try {
        kc = loadKubeConfig().kc;
      } catch (e) {
        why = `no Kubernetes configuration: ${(e as Error).message}`;
      }
    if (!kc || !nodeName) {
      const s = unreadableSelection(keys, why!);
      log.error({ reason: s.state === 'unknown' ? s.reason : '' }, 'custom networking: no ENI will be created');
      set(s);
      return;
    }
    const src = new EniConfigSource({ kc, nodeName, keys, log });
    source = src;
    log.info({ node: nodeName, ...keys }, 'custom networking on: watching the node and its ENIConfig');
    src.onChange((s) => set(s));
    src.start();
    set(src.current());
  })().catch((e: Error) => {
    const s = unknownSelection(keys, `the Kubernetes client could not be loaded: ${e.message}`);
    log.error({ reason: s.reason }, 'custom networking: no ENI will be created');
    set(s);
  });
  return {
    current: () => selection,
    block: () => selectionBlock(selection),
    name: () => (selection.state !== 'off' ? selection.name : undefined),
    onChange: (fn) => listeners.push(fn),
    stop: () => {
      stopped = true;
      source?.stop();
    },
  };
}

/** `unknown` with `reason` (what eniconfig/source.ts `unreadableSelection` builds, without importing the client). */
function unknownSelection(
  keys: { labelDef: string; annotationDef: string },
  reason: string,
): { state: 'unknown'; selectedBy: string; reason: string } {
  return {
    state: 'unknown',
    selectedBy: `the node's annotation ${keys.annotationDef} or label ${keys.labelDef}`,
    reason,
  };
}
