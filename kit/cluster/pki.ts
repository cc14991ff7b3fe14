/**
 * The identities of the real test cluster, made with `openssl` only (no kubeadm, no cfssl):
 * a CA, kube-apiserver's serving certificate, the ServiceAccount signing key pair, a static
 * token file (`--token-auth-file`, format `token,user,uid,"group1,group2"`) and one
 * kubeconfig per client. Sources: Kubernetes docs "Authenticating" (static token file) and
 * "PKI certificates and requirements" (the apiserver's SANs).
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** A client identity of the static token file. */
export interface ClusterUser {
  /** Kubeconfig file name stem, e.g. `admin`. */
  id: string;
  user: string;
  groups: string[];
}

/** The kubeconfig id of node `nodeName`'s kubelet (`kubelet-<name>`). */
export const kubeletId = (nodeName: string): string => `kubelet-${nodeName}`;

/**
 * The clients: admin (system:masters), the control plane, kube-proxy and one kubelet per
 * name in `nodeNames` (`system:node:<name>` in `system:nodes`, so the Node authorizer and
 * NodeRestriction apply to each); the first node's is also `kubelet`. The token file is read
 * once at the apiserver's start, so a node that joins later must be named here already.
 */
export function clusterUsers(nodeNames: string[]): ClusterUser[] {
  const kubelets = nodeNames.map((n) => ({ id: kubeletId(n), user: `system:node:${n}`, groups: ['system:nodes'] }));
  return [
    { id: 'admin', user: 'eni-ipam-admin', groups: ['system:masters'] },
    { id: 'controller-manager', user: 'system:kube-controller-manager', groups: [] },
    { id: 'scheduler', user: 'system:kube-scheduler', groups: [] },
    ...(nodeNames[0] ? [{ ...kubelets[0]!, id: 'kubelet' }] : []),
    ...kubelets,
    { id: 'kube-proxy', user: 'system:kube-proxy', groups: [] },
  ];
}

/** Paths of what {@link makePki} wrote. */
export interface Pki {
  dir: string;
  caCert: string;
  caKey: string;
  apiserverCert: string;
  apiserverKey: string;
  saKey: string;
  saPub: string;
  tokenFile: string;
  /** Kubeconfig path per user id, each pointing at `server`. */
  kubeconfigs: Record<string, string>;
}

/** A kubeconfig for `server` authenticating with a bearer `token`, trusting `caCert`. */
export function kubeconfigYaml(server: string, caCert: string, user: string, token: string): string {
  return [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    '- name: eni-ipam',
    `  cluster: { server: ${JSON.stringify(server)}, certificate-authority: ${JSON.stringify(caCert)} }`,
    'users:',
    `- name: ${JSON.stringify(user)}`,
    `  user: { token: ${JSON.stringify(token)} }`,
    'contexts:',
    `- name: eni-ipam`,
    `  context: { cluster: eni-ipam, user: ${JSON.stringify(user)} }`,
    'current-context: eni-ipam',
    '',
  ].join('\n');
}

/**
 * Writes the CA, the apiserver's certificate (SANs: `sanIps`, 127.0.0.1, the first
 * Service IP and the kubernetes.default names), the ServiceAccount key pair, the token
 * file and the kubeconfigs under `dir/pki`. `servers[id]` overrides the server URL per
 * kubeconfig (default `server`).
 * @throws Error with openssl's stderr when a step fails.
 */
export async function makePki(o: {
  dir: string;
  /** Every node's name (the first is the control-plane node's), joins to come included. */
  nodeNames: string[];
  server: string;
  servers?: Record<string, string>;
  sanIps: string[];
  serviceIp: string;
}): Promise<Pki> {
  const dir = path.join(o.dir, 'pki');
  await mkdir(dir, { recursive: true });
  const p = (f: string): string => path.join(dir, f);
  const ssl = async (args: string[]): Promise<void> => {
    await run('openssl', args).catch((e: { stderr?: string; message: string }) => {
      throw new Error(`openssl ${args[0]} failed: ${(e.stderr ?? e.message).trim()}`);
    });
  };
  await ssl(
    ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', p('ca.key'), '-out', p('ca.crt')].concat([
      '-days',
      '30',
      '-subj',
      '/CN=eni-ipam-test-cluster-ca',
    ]),
  );
  await ssl(
    ['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', p('apiserver.key'), '-out', p('apiserver.csr')].concat([
      '-subj',
      '/CN=kube-apiserver',
    ]),
  );
  const names = [
    'kubernetes',
    'kubernetes.default',
    'kubernetes.default.svc',
    'kubernetes.default.svc.cluster.local',
    'localhost',
  ];
  const ips = [...new Set([...o.sanIps, '127.0.0.1', o.serviceIp])];
  await writeFile(
    p('apiserver.ext'),
    `subjectAltName=${[...names.map((n) => `DNS:${n}`), ...ips.map((i) => `IP:${i}`)].join(',')}\nextendedKeyUsage=serverAuth\n`,
  );
  await ssl(
    ['x509', '-req', '-in', p('apiserver.csr'), '-CA', p('ca.crt'), '-CAkey', p('ca.key')].concat([
      '-CAcreateserial',
      '-days',
      '30',
      '-out',
      p('apiserver.crt'),
      '-extfile',
      p('apiserver.ext'),
    ]),
  );
  await ssl(['genrsa', '-out', p('sa.key'), '2048']);
  await ssl(['rsa', '-in', p('sa.key'), '-pubout', '-out', p('sa.pub')]);
  const kubeconfigs: Record<string, string> = {};
  const lines: string[] = [];
  for (const u of clusterUsers(o.nodeNames)) {
    const token = randomBytes(24).toString('hex');
    lines.push(`${token},${u.user},${u.id}${u.groups.length ? `,"${u.groups.join(',')}"` : ''}`);
    kubeconfigs[u.id] = p(`${u.id}.kubeconfig`);
    await writeFile(kubeconfigs[u.id]!, kubeconfigYaml(o.servers?.[u.id] ?? o.server, p('ca.crt'), u.user, token), {
      mode: 0o600,
    });
  }
  await writeFile(p('tokens.csv'), `${lines.join('\n')}\n`, { mode: 0o600 });
  return {
    dir,
    caCert: p('ca.crt'),
    caKey: p('ca.key'),
    apiserverCert: p('apiserver.crt'),
    apiserverKey: p('apiserver.key'),
    saKey: p('sa.key'),
    saPub: p('sa.pub'),
    tokenFile: p('tokens.csv'),
    kubeconfigs,
  };
}
