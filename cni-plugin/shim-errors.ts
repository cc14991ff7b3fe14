/**
 * The native shim's CNI errors (cni-plugin/shim/eni-ipam-shim.c), answered while ipamd
 * cannot take the invocation: part of the one catalogue (error-catalogue.ts,
 * docs/design.md#cni-errors); test/unit/cni-error-catalogue.test.ts checks the C source
 * against these entries, code and message.
 */
import { CniCode, type CniErrorEntry } from './errors.js';

/** The shim's entries, by id. */
export const SHIM_ERRORS = {
  'shim-incompatible': {
    code: CniCode.IncompatibleVersion,
    msg: 'unsupported cniVersion',
    when: 'DEL spooled while ipamd is down: cniVersion unknown',
    by: 'shim',
  },
  'shim-no-container': {
    code: CniCode.InvalidEnv,
    msg: 'missing CNI_CONTAINERID',
    when: 'DEL spooled: CNI_CONTAINERID unset',
    by: 'shim',
  },
  'shim-no-ifname': {
    code: CniCode.InvalidEnv,
    msg: 'missing CNI_IFNAME',
    when: 'DEL spooled: CNI_IFNAME unset',
    by: 'shim',
  },
  'shim-no-both': {
    code: CniCode.InvalidEnv,
    msg: 'missing CNI_CONTAINERID, CNI_IFNAME',
    when: 'DEL spooled: both unset',
    by: 'shim',
  },
  'shim-container-id': {
    code: CniCode.InvalidEnv,
    msg: 'invalid CNI_CONTAINERID',
    when: 'DEL spooled: malformed container id',
    by: 'shim',
  },
  'shim-ifname': {
    code: CniCode.InvalidEnv,
    msg: 'invalid CNI_IFNAME',
    when: 'DEL spooled: malformed interface name',
    by: 'shim',
  },
  'shim-no-command': {
    code: CniCode.InvalidEnv,
    msg: 'missing CNI_COMMAND',
    when: 'ipamd down and CNI_COMMAND unset',
    by: 'shim',
  },
  'shim-bad-command': {
    code: CniCode.InvalidEnv,
    msg: 'CNI_COMMAND {verb} is not implemented',
    when: 'ipamd down and an unknown verb',
    by: 'shim',
    cFormat: 'CNI_COMMAND %.64s is not implemented',
  },
  'shim-refused': {
    code: CniCode.IoFailure,
    msg: '{reason}',
    when: 'ipamd cannot run invocations here (F: hostPID, netns mount missing; the reason names it)',
    by: 'shim',
  },
  'shim-decode': {
    code: CniCode.DecodeFailure,
    msg: 'failed to decode the network configuration',
    when: 'stdin not a JSON object (or nested over 64 deep)',
    by: 'shim',
  },
  'shim-config': {
    code: CniCode.InvalidNetworkConfig,
    msg: 'invalid network configuration',
    when: 'bad execSocket, or (DEL spooled) bad cniVersion type or name',
    by: 'shim',
  },
  'shim-config-size': {
    code: CniCode.InvalidNetworkConfig,
    msg: 'network configuration too large',
    when: 'stdin over 8 MiB',
    by: 'shim',
  },
  'shim-not-serving': {
    code: CniCode.TryAgainLater,
    msg: 'ipamd is not serving on {socket}, try again later',
    when: 'ADD (after ipamdWaitSeconds), CHECK, GC while ipamd is not serving',
    by: 'shim',
    cFormat: 'ipamd is not serving on %s, try again later',
  },
  'shim-not-serving-waited': {
    code: CniCode.TryAgainLater,
    msg: 'ipamd is not serving on {socket} (waited {seconds} s), try again later',
    when: 'ADD after waiting for ipamd',
    by: 'shim',
    cFormat: 'ipamd is not serving on %s (waited %.1f s), try again later',
  },
  'shim-spool-failed': {
    code: CniCode.TryAgainLater,
    msg: 'ipamd is not serving and the DEL could not be recorded, try again later',
    when: 'DEL while ipamd is down and the spool cannot be written',
    by: 'shim',
  },
  'shim-send-lost': {
    code: CniCode.TryAgainLater,
    msg: 'lost the connection to ipamd while sending, try again later',
    when: 'ipamd died while the request was sent',
    by: 'shim',
  },
  'shim-no-answer': {
    code: CniCode.TryAgainLater,
    msg: 'no answer from ipamd, try again later',
    when: 'ipamd killed mid-request, or no answer within 110 s',
    by: 'shim',
  },
  'shim-closed': {
    code: CniCode.TryAgainLater,
    msg: 'ipamd closed the connection without an answer, try again later',
    when: 'ipamd killed or restarted mid-request (outcome unknown, never run twice)',
    by: 'shim',
  },
  'shim-malformed': {
    code: CniCode.TryAgainLater,
    msg: 'malformed answer from ipamd, try again later',
    when: 'a truncated answer (ipamd killed while answering)',
    by: 'shim',
  },
  'shim-socket': {
    code: CniCode.TryAgainLater,
    msg: 'cannot create a socket, try again later',
    when: 'out of file descriptors',
    by: 'shim',
  },
  'shim-node-stdin': {
    code: CniCode.TryAgainLater,
    msg: 'cannot pass stdin to the eni-ipam Node plugin',
    when: 'developer mode (nodePlugin): memfd failed',
    by: 'shim',
  },
  'shim-node-exec': {
    code: CniCode.TryAgainLater,
    msg: 'cannot run the eni-ipam Node plugin (nodePlugin in the network config)',
    when: 'developer mode: exec failed',
    by: 'shim',
  },
  'shim-status-down': {
    code: CniCode.PluginNotAvailable,
    msg: 'ipamd is not serving on {socket}',
    when: 'STATUS while ipamd is not serving (or F)',
    by: 'shim',
    cFormat: 'ipamd is not serving on %s',
  },
} as const satisfies Record<string, CniErrorEntry>;
