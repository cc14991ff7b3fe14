/**
 * CRI runtime stand-in for tests, demos and benches: see standin.ts.
 */
export {
  CriStandIn,
  startCriStandIn,
  CRI_STANDIN_IDENTITY,
  type CriSandbox,
  type CriStandInOptions,
} from './standin.js';
