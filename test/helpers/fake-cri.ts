/**
 * Deprecated import path, kept while branches written against it merge: the CRI
 * stand-in lives in sim/cri/. `startFakeCri()` is `startCriStandIn({ identity: null })` (Version UNIMPLEMENTED,
 * as this helper always answered).
 */
import { startCriStandIn, type CriSandbox, type CriStandIn } from '../../sim/cri/index.js';

/** @deprecated use {@link CriSandbox} from sim/cri. */
export type FakeSandbox = CriSandbox;
/** @deprecated use {@link CriStandIn} from sim/cri. */
export type FakeCri = CriStandIn;
/** @deprecated use `startCriStandIn({ identity: null })` from sim/cri. */
export const startFakeCri = (): Promise<CriStandIn> => startCriStandIn({ identity: null });
