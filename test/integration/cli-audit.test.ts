/**
 * `eni-ipam audit` against a real ipamd on the simulated cloud, with pods wired by the
 * real plugin in real network namespaces and a CRI runtime (test stand-in speaking the
 * real CRI gRPC API) the CLI reads. First the audit must be clean (exit 0); then each
 * kind of mismatch is built for real — a leaked ip rule in the node netns, an IP EC2
 * no longer has (UnassignPrivateIpAddresses through the SDK), a pod with no allocation
 * (a ready sandbox ipamd never served), an allocation with no pod (a wired pod the
 * runtime does not list) — and each must be reported with its subject; exit 1.
 *
 * ipamd itself is given an unreadable CRI endpoint so its releases stay frozen: it
 * changes nothing while the test plants the mismatches. The CLI reads the pods on its
 * node from the test run's real kube-apiserver, as the chart's ServiceAccount.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { EC2Client, UnassignPrivateIpAddressesCommand } from '@aws-sdk/client-ec2';
import path from 'node:path';
import { startCniNode } from '../helpers/cni-node.js';
import { runCli } from '../helpers/cli-run.js';
import { realKubeEnv } from '../helpers/real-kube-env.js';
import { startCriStandIn } from '../../sim/cri/index.js';

const run = promisify(execFile);

test(
  'audit is clean on a consistent node, then reports each planted mismatch (exit 1)',
  // The first Kubernetes file of a run starts the run's shared kube-apiserver + etcd inside
  // its test (test/cluster/apiserver-shared.ts): under a loaded CI that alone took > 120 s.
  { timeout: 300_000 },
  async (t) => {
    const cri = await startCriStandIn({ identity: null });
    t.after(() => cri.close());
    const n = await startCniNode(t, 'cliaud', {
      ipamdEnv: { CRI_RUNTIME_ENDPOINT: 'unix:///nonexistent/cri.sock', WARM_IP_TARGET: '4' },
    });
    const k8s = await realKubeEnv(t, { prefix: 'cliaud' });
    const kube = k8s.kube;
    const base = [
      '--node-name',
      k8s.nodeName,
      '--kubeconfig',
      k8s.kubeconfig(),
      '--introspection',
      `127.0.0.1:${n.d.introspectionPort}`,
      '--socket',
      n.h.socket,
      '--checkpoint',
      n.h.checkpoint,
      '--cri-endpoint',
      cri.endpoint,
      '--netns',
      n.node.path,
      // Each read's deadline (default 5 s): a loaded CI once took longer for one source, and the
      // audit rightly said incomplete instead of reporting; this test is about the findings.
      '--timeout',
      '30000',
    ];
    const env = { AWS_EC2_ENDPOINT: n.h.sim.ec2Endpoint, AWS_EC2_METADATA_SERVICE_ENDPOINT: n.h.sim.imdsEndpoint };
    const ips: Record<string, string> = {};
    for (const name of ['a', 'b', 'c']) {
      const pod = await n.pod();
      const id = `${name}`.repeat(64);
      const add = await n.call({
        command: 'ADD',
        containerId: id,
        netns: pod.path,
        ifName: 'eth0',
        args: {
          K8S_POD_NAME: `pod-${name}`,
          K8S_POD_NAMESPACE: 'default',
          K8S_POD_INFRA_CONTAINER_ID: id,
          IgnoreUnknown: '1',
        },
      });
      assert.equal(add.code, 0, `ADD pod-${name}: ${add.stdout} ${add.stderr}`);
      ips[name] = String(add.json.ips[0].address).split('/')[0]!;
      if (name !== 'b') cri.addPod(id, ips[name]!);
      await kube.upsertPod({ namespace: 'default', name: `pod-${name}`, nodeName: k8s.nodeName, podIP: ips[name]! });
    }

    // Baseline: a and c are listed by the runtime; b is added to it too, for the clean run.
    cri.addPod('b'.repeat(64), ips.b!);
    const clean = await runCli(['audit', ...base], env);
    assert.equal(clean.code, 0, `clean audit:\n${clean.stdout}${clean.stderr}`);
    assert.match(clean.stdout, /no mismatch: every source agrees with ipamd/);
    assert.match(clean.stdout, /kubernetes +ok .* 3 pods on this node/);

    // Plant each mismatch.
    cri.removePod('b'.repeat(64)); // allocation with no pod
    cri.addPod('d'.repeat(64), '10.0.0.241'); // pod with no allocation
    await kube.upsertPod({ namespace: 'default', name: 'stale', nodeName: k8s.nodeName, podIP: '10.0.0.243' }); // a Kubernetes pod with no allocation
    const dead = await n.pod();
    await run('nsenter', [
      `--net=${n.node.path}`,
      'ip',
      'link',
      'add',
      'enileak0',
      'type',
      'veth',
      'peer',
      'name',
      'eth0',
      'netns',
      path.basename(dead.path),
    ]); // a veth with no route
    const leaked = '10.0.0.242';
    await run('nsenter', [`--net=${n.node.path}`, 'ip', 'rule', 'add', 'from', leaked, 'lookup', '2', 'prio', '1536']); // leaked rule
    const allocs = (await (await fetch(`http://127.0.0.1:${n.d.introspectionPort}/v1/allocations`)).json()) as Array<{
      ipv4: string;
      eniId: string;
    }>;
    const c = allocs.find((x) => x.ipv4 === ips.c)!;
    const ec2 = new EC2Client({
      region: n.h.sim.state.region,
      endpoint: n.h.sim.ec2Endpoint,
      credentials: { accessKeyId: 't', secretAccessKey: 't' },
      maxAttempts: 1,
    });
    t.after(() => ec2.destroy());
    await ec2.send(
      new UnassignPrivateIpAddressesCommand({ NetworkInterfaceId: c.eniId, PrivateIpAddresses: [c.ipv4] }),
    ); // an IP EC2 no longer has

    const r = await runCli(['audit', ...base], env);
    assert.equal(r.code, 1, `audit with mismatches:\n${r.stdout}${r.stderr}`);
    const expect: Array<[string, string]> = [
      ['allocation-without-pod', ips.b!],
      ['pod-without-allocation', '10.0.0.241'],
      ['leaked-ip-rule', leaked],
      ['ec2-ip-missing', ips.c!],
      ['kube-pod-without-allocation', '10.0.0.243'],
      ['veth-without-route', 'enileak0'],
    ];
    for (const [kind, subject] of expect) {
      assert.match(
        r.stdout,
        new RegExp(`\\[${kind}\\] ${subject.replace(/\./g, '\\.')}\\b[^\\n]*\\n  what: +.*\\n  means: +.*\\n  do: +`),
        `${kind} ${subject} not reported:\n${r.stdout}`,
      );
    }
    assert.match(
      r.stdout,
      new RegExp(`do: +remove it: ip rule del prio 1536 from ${leaked.replace(/\./g, '\\.')} lookup 2`),
      'the exact clean-up command',
    );
    const json = await runCli(['audit', '-o', 'json', ...base], env);
    assert.equal(json.code, 1);
    const doc = JSON.parse(json.stdout) as { findings: Array<{ kind: string; subject: string }>; incomplete: boolean };
    for (const [kind, subject] of expect)
      assert.ok(
        doc.findings.some((f) => f.kind === kind && f.subject.startsWith(subject)),
        `${kind} ${subject} missing in JSON`,
      );
    assert.equal(doc.incomplete, false);
  },
);
