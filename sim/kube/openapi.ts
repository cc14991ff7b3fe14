/**
 * The OpenAPI v3 documents kubectl reads before `kubectl apply` / `create` / `replace`
 * (https://kubernetes.io/docs/concepts/overview/kubernetes-api/#openapi-v3): the root
 * `GET /openapi/v3` lists one document per group-version, and the
 * crd.k8s.amazonaws.com/v1alpha1 document declares the ENIConfig operations with their
 * `x-kubernetes-group-version-kind` and the `fieldValidation` query parameter. That tells
 * kubectl the server validates fields itself (the stand-in checks ENIConfig bodies against
 * the CRD schema, eniconfig.ts), so kubectl needs no client-side schema; PATCH bodies are
 * merge or JSON patches, as for any custom resource (kubectl then sends a merge patch).
 * Core/v1 is not described: kubectl commands that need its schema are not used on the stand-in.
 */
import { ENICONFIG_API_VERSION, ENICONFIG_GROUP, ENICONFIG_VERSION } from './eniconfig.js';

const GV_PATH = `apis/${ENICONFIG_API_VERSION}`;

/** `GET /openapi/v3`: the group-version documents served. */
export const OPENAPI_V3_ROOT = {
  paths: { [GV_PATH]: { serverRelativeURL: `/openapi/v3/${GV_PATH}?hash=standin-eniconfig-1` } },
};

/** Path of the crd.k8s.amazonaws.com/v1alpha1 document (without the query). */
export const OPENAPI_V3_ENICONFIG_PATH = `/openapi/v3/${GV_PATH}`;

const gvk = { group: ENICONFIG_GROUP, version: ENICONFIG_VERSION, kind: 'ENIConfig' };
const query = (name: string) => ({ name, in: 'query', schema: { type: 'string', uniqueItems: true } });
const ok = { responses: { '200': { description: 'OK' } } };
const op = (action: string, extra: Record<string, unknown> = {}) => ({
  'x-kubernetes-action': action,
  'x-kubernetes-group-version-kind': gvk,
  ...ok,
  ...extra,
});
const writeParams = [query('dryRun'), query('fieldManager'), query('fieldValidation')];

/** The crd.k8s.amazonaws.com/v1alpha1 OpenAPI v3 document (operations only; no schemas). */
export const OPENAPI_V3_ENICONFIG = {
  openapi: '3.0.0',
  info: { title: 'Kubernetes', version: 'v1.30.0-standin' },
  paths: {
    [`/${GV_PATH}/eniconfigs`]: {
      get: op('list', { parameters: [query('labelSelector'), query('fieldSelector'), query('watch')] }),
      post: op('post', { parameters: writeParams }),
    },
    [`/${GV_PATH}/eniconfigs/{name}`]: {
      get: op('get'),
      put: op('put', { parameters: writeParams }),
      patch: op('patch', {
        parameters: writeParams,
        requestBody: {
          content: {
            'application/json-patch+json': { schema: { type: 'object' } },
            'application/merge-patch+json': { schema: { type: 'object' } },
          },
        },
      }),
      delete: op('delete'),
    },
  },
  components: { schemas: {} },
};
