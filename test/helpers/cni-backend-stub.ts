/** Deprecated import path, kept while branches written against it merge: see cni-backend-standin.ts. */
export {
  startCniBackendStandIn as startCniBackendStub,
  type CniBackendStandIn as CniBackendStub,
  type CniBackendCall as StubCall,
} from '../../kit/cni-backend-standin.js';
