/**
 * Deprecated import path, kept while branches written against it merge: the CRI
 * stand-in lives in sim/cri/. `startCriStandin(path)` is `startCriStandIn({ socketPath: path })`.
 */
import { startCriStandIn, type CriSandbox, CriStandIn } from '../../sim/cri/index.js';

/** @deprecated use {@link CriSandbox} from sim/cri. */
export type StandinSandbox = CriSandbox;
/** @deprecated use {@link CriStandIn} from sim/cri. */
export { CriStandIn as CriStandin };
/** @deprecated use `startCriStandIn({ socketPath })` from sim/cri. */
export const startCriStandin = (socketPath: string): Promise<CriStandIn> => startCriStandIn({ socketPath });
