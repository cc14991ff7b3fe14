/**
 * Kubernetes API errors as one readable line (ipamd/kube/errors.ts; issue 37): the real
 * @kubernetes/client-node ApiException (whose message is an HTTP dump with the Status
 * JSON escaped twice, "Unknown API Status Code!" for a plain 403), a Watch error, our own
 * KubeUnavailableError wrapping one, and the identity a call is made as (the token's subject).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ApiException } from '@kubernetes/client-node/dist/gen/apis/exception.js';
import { KubeConfig } from '@kubernetes/client-node/dist/config.js';
import { describeApiCall, describeError, KubeUnavailableError } from '../../ipamd/kube/errors.js';
import { kubeIdentity } from '../../ipamd/kube/config.js';

const USER = 'system:serviceaccount:kube-system:eni-ipam';
const forbidden = JSON.stringify({
  kind: 'Status',
  apiVersion: 'v1',
  metadata: {},
  status: 'Failure',
  message: `pods is forbidden: User "${USER}" cannot list resource "pods" in API group "" at the cluster scope`,
  reason: 'Forbidden',
  details: { kind: 'pods' },
  code: 403,
});
/** What the client throws for a 403 (the body as the generated client hands it: a JSON string). */
const apiException = () =>
  new ApiException(403, 'Unknown API Status Code!', forbidden, { 'content-type': 'application/json', 'audit-id': 'x' });

test('an ApiException is HTTP code, reason and the Status message; never the dump', () => {
  const line = describeError(apiException());
  assert.equal(
    line,
    `HTTP 403 Forbidden: pods is forbidden: User "${USER}" cannot list resource "pods" in API group "" at the cluster scope`,
  );
  assert.doesNotMatch(line, /HTTP-Code|Unknown API Status Code|Headers|\\|\n/);
});

test('a call line names verb, resource and identity; the identity once, where a 403 already names the user', () => {
  const call = { verb: 'list', resource: 'pods (spec.nodeName=n1)', identity: USER };
  assert.equal(
    describeApiCall(call, apiException()),
    `list pods (spec.nodeName=n1): HTTP 403 Forbidden: pods is forbidden: User "${USER}" cannot list resource "pods" in API group "" at the cluster scope`,
  );
  const unauthorized = new ApiException(
    401,
    'Unauthorized',
    JSON.stringify({ kind: 'Status', message: 'Unauthorized', reason: 'Unauthorized', code: 401 }),
    {},
  );
  assert.equal(describeApiCall(call, unauthorized), `list pods (spec.nodeName=n1) as ${USER}: HTTP 401 Unauthorized`);
  const watchError = Object.assign(new Error('Forbidden'), { statusCode: 403 });
  assert.equal(
    describeApiCall({ ...call, verb: 'watch' }, watchError),
    `watch pods (spec.nodeName=n1) as ${USER}: HTTP 403 Forbidden`,
  );
  assert.equal(
    describeApiCall(call, new Error('connect ECONNREFUSED 10.96.0.1:443')),
    `list pods (spec.nodeName=n1) as ${USER}: connect ECONNREFUSED 10.96.0.1:443`,
  );
});

test('our wrapper keeps its line and does not append its cause again; a foreign cause is described, not dumped', () => {
  const e = apiException();
  const wrapped = new KubeUnavailableError(describeApiCall({ verb: 'list', resource: 'pods' }, e), {
    cause: e,
    statusCode: 403,
  });
  assert.equal(describeError(wrapped), wrapped.message);
  const plain = new Error('pod list failed', { cause: e });
  assert.equal(describeError(plain), `pod list failed: ${describeError(e)}`);
});

test("the identity is the bearer token's subject, else the kubeconfig user's name", () => {
  const jwt = (claims: object) => ['e30', Buffer.from(JSON.stringify(claims)).toString('base64url'), 'sig'].join('.');
  const kc = (user: object) => {
    const k = new KubeConfig();
    k.loadFromOptions({
      clusters: [{ name: 'c', server: 'https://127.0.0.1:6443' }],
      users: [{ name: 'u', ...user }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    return k;
  };
  assert.equal(kubeIdentity(kc({ token: jwt({ sub: USER }) })), USER);
  assert.equal(kubeIdentity(kc({ token: 'not-a-jwt' })), 'u');
  assert.equal(kubeIdentity(kc({})), 'u');
});
