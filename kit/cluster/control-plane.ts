/**
 * The test cluster's control plane in the node's network namespace: etcd (client URL
 * 127.0.0.1:2379, no fsync: a test store), kube-apiserver (port 6443 on 0.0.0.0, or :: for IPv6 families; Node + RBAC
 * authorization, NodeRestriction, privileged pods allowed, static tokens),
 * kube-controller-manager (per-controller ServiceAccounts, the root CA for every pod's
 * `kube-root-ca.crt`) and kube-scheduler. Flags follow hack/local-up-cluster.sh.
 */
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import type { ClusterBinaries } from './binaries.js';
import { startDaemon, waitStarted, type DaemonProcess } from './daemon-process.js';
import type { Kubectl } from './kubectl.js';
import type { Pki } from './pki.js';
import type { FamilyPlan } from './ip-family.js';

/** The running control plane. */
export interface ControlPlane {
  procs: DaemonProcess[];
  /** Stops the scheduler, the controller manager, the apiserver and etcd, in that order. */
  stop(): Promise<void>;
}

/**
 * Starts etcd, then kube-apiserver (waits for /readyz), then the controller manager and
 * the scheduler (waits until the `default` ServiceAccount exists: pods can be admitted).
 * @throws Error naming the component that exited or did not become ready, with its log tail.
 */
export async function startControlPlane(o: {
  bins: ClusterBinaries;
  dir: string;
  netns: string;
  pki: Pki;
  /** The family: the advertised address (its first node IP), the Service ranges, the bind wildcard. */
  family: FamilyPlan;
  kubectl: Kubectl;
}): Promise<ControlPlane> {
  const logs = path.join(o.dir, 'logs');
  await mkdir(logs, { recursive: true });
  const procs: DaemonProcess[] = [];
  const stop = async (): Promise<void> => {
    for (const p of [...procs].reverse()) await p.stop();
  };
  const start = (name: string, argv: string[]): DaemonProcess => {
    const p = startDaemon({ name, argv, logFile: path.join(logs, `${name}.log`), netns: o.netns });
    procs.push(p);
    return p;
  };
  try {
    const bin = (b: string): string => path.join(b === 'etcd' ? o.bins.etcd : o.bins.k8s, b);
    const etcd = start('etcd', [
      bin('etcd'),
      `--data-dir=${path.join(o.dir, 'etcd')}`,
      '--listen-client-urls=http://127.0.0.1:2379',
      '--advertise-client-urls=http://127.0.0.1:2379',
      '--listen-peer-urls=http://127.0.0.1:2380',
      '--unsafe-no-fsync',
      '--log-level=warn',
    ]);
    const { pki } = o;
    const api = start('kube-apiserver', [
      bin('kube-apiserver'),
      '--etcd-servers=http://127.0.0.1:2379',
      `--advertise-address=${o.family.nodeIps[0]}`,
      `--bind-address=${o.family.bindAddress}`,
      '--secure-port=6443',
      `--cert-dir=${path.join(o.dir, 'apiserver-certs')}`,
      `--tls-cert-file=${pki.apiserverCert}`,
      `--tls-private-key-file=${pki.apiserverKey}`,
      `--client-ca-file=${pki.caCert}`,
      `--token-auth-file=${pki.tokenFile}`,
      '--authorization-mode=Node,RBAC',
      '--enable-admission-plugins=NodeRestriction',
      '--allow-privileged=true',
      `--service-cluster-ip-range=${o.family.serviceCidrs.join(',')}`,
      '--service-account-issuer=https://kubernetes.default.svc',
      `--service-account-key-file=${pki.saPub}`,
      `--service-account-signing-key-file=${pki.saKey}`,
      '--kubelet-preferred-address-types=InternalIP',
      '--endpoint-reconciler-type=lease',
      '--profiling=false',
      '--v=1',
    ]);
    const readyz = async (): Promise<boolean> => (await o.kubectl.try(['get', '--raw', '/readyz'])).code === 0;
    await waitStarted(api, 'the apiserver /readyz', readyz, 90_000);
    if (etcd.exited()) throw new Error(`etcd exited\n${etcd.tail()}`);
    const kcm = start('kube-controller-manager', [
      bin('kube-controller-manager'),
      `--kubeconfig=${pki.kubeconfigs['controller-manager']}`,
      `--authentication-kubeconfig=${pki.kubeconfigs['controller-manager']}`,
      `--authorization-kubeconfig=${pki.kubeconfigs['controller-manager']}`,
      `--root-ca-file=${pki.caCert}`,
      `--service-account-private-key-file=${pki.saKey}`,
      '--use-service-account-credentials=true',
      '--leader-elect=false',
      '--bind-address=127.0.0.1',
      '--v=1',
    ]);
    const sched = start('kube-scheduler', [
      bin('kube-scheduler'),
      `--kubeconfig=${pki.kubeconfigs['scheduler']}`,
      `--authentication-kubeconfig=${pki.kubeconfigs['scheduler']}`,
      `--authorization-kubeconfig=${pki.kubeconfigs['scheduler']}`,
      '--leader-elect=false',
      '--bind-address=127.0.0.1',
      '--v=1',
    ]);
    const sa = async (): Promise<boolean> =>
      (await o.kubectl.try(['-n', 'default', 'get', 'serviceaccount', 'default'])).code === 0 &&
      (await o.kubectl.try(['-n', 'kube-system', 'get', 'configmap', 'kube-root-ca.crt'])).code === 0;
    await waitStarted(kcm, 'the default ServiceAccount and kube-root-ca.crt', sa, 90_000);
    if (sched.exited()) throw new Error(`kube-scheduler exited\n${sched.tail()}`);
    return { procs, stop };
  } catch (e) {
    await stop();
    throw e;
  }
}
