/**
 * `eni-ipam audit`: cross-checks the checkpoint, ipamd's datastore, the kernel, EC2, the
 * CRI runtime and the Kubernetes pods on this node; prints every mismatch with what it
 * means and what to do. Exit 1 when any mismatch is found; 5 when none is but a source
 * could not be read (the answer is incomplete); 0 when all agree. With ipamd down, the
 * checkpoint is what the others are compared with, and ipamd is listed as unreadable.
 */
import type { CommandModule } from 'yargs';
import { auditFindings } from '../audit/checks.js';
import type { AuditInputs } from '../audit/collect.js';
import { EXIT } from '../errors.js';
import { globalOptions } from '../options.js';
import { paint, print, emit, table } from '../output.js';

/** Each source's state for the report: `ok (n items)`, `unreadable: why` or `skipped: why`. */
export function sourceSummary(
  i: AuditInputs,
): Array<{ source: string; from: string; state: 'ok' | 'unreadable' | 'skipped'; note: string }> {
  const row = (
    source: string,
    r:
      AuditInputs['checkpoint'] | AuditInputs['kernel'] | AuditInputs['ec2'] | AuditInputs['cri'] | AuditInputs['kube'],
    count: (d: never) => string,
  ) =>
    r.ok
      ? { source, from: r.from, state: 'ok' as const, note: count(r.data as never) }
      : 'error' in r
        ? { source, from: r.from, state: 'unreadable' as const, note: r.error }
        : { source, from: r.from, state: 'skipped' as const, note: r.skipped };
  return [
    i.ipamd.ok
      ? {
          source: 'ipamd',
          from: i.ipamd.from,
          state: 'ok' as const,
          note: `${i.allocations.length} allocations on ${i.status.enis.length} ENIs`,
        }
      : {
          source: 'ipamd',
          from: i.ipamd.from,
          state: 'unreadable' as const,
          note: `${'error' in i.ipamd ? i.ipamd.error : ''}; the checkpoint's ${i.allocations.length} allocations stand in for it`,
        },
    row('checkpoint', i.checkpoint, (d: { allocations: unknown[] }) => `${d.allocations.length} allocations`),
    row(
      'kernel',
      i.kernel,
      (d: { pods: Map<string, unknown>; rulesOnly: string[] }) =>
        `${d.pods.size} wired pod IPs, ${d.rulesOnly.length} rule-only IPs`,
    ),
    row('ec2', i.ec2, (d: unknown[]) => `${d.length} ENIs described`),
    row('cri', i.cri, (d: unknown[]) => `${d.length} ready sandboxes`),
    row('kubernetes', i.kube, (d: unknown[]) => `${d.length} pods on this node`),
  ];
}

/** `audit`: exit 1 on any mismatch, 5 when a source could not be read, else 0. */
export const auditCommand: CommandModule = {
  command: 'audit',
  describe: 'cross-check checkpoint, ipamd, kernel, EC2, CRI and Kubernetes; exit 1 on any mismatch',
  builder: (y) =>
    y
      .option('region', { type: 'string', describe: 'AWS region for EC2 (default: AWS_REGION, else IMDS)' })
      .option('ec2', { type: 'boolean', default: true, describe: 'ask EC2 (--no-ec2 to skip)' })
      .option('node-name', {
        type: 'string',
        describe: 'Kubernetes node name (default: MY_NODE_NAME); without it the Kubernetes check is skipped',
      })
      .option('kubeconfig', {
        type: 'string',
        describe: 'kubeconfig file (default: in-cluster, KUBECONFIG, ~/.kube/config)',
      }),
  handler: async (argv) => {
    const o = globalOptions(argv);
    const { collectAudit } = await import('../audit/collect.js'); // the AWS SDK and Kubernetes client load only here
    const inputs = await collectAudit(o, {
      ...(argv.region ? { region: String(argv.region) } : {}),
      noEc2: argv.ec2 === false,
      ...(argv['node-name'] ? { nodeName: String(argv['node-name']) } : {}),
      ...(argv.kubeconfig ? { kubeconfig: String(argv.kubeconfig) } : {}),
    });
    const findings = auditFindings(inputs);
    const sources = sourceSummary(inputs);
    const incomplete = sources.some((s) => s.state === 'unreadable');
    process.exitCode = findings.length > 0 ? EXIT.findings : incomplete ? EXIT.incomplete : EXIT.ok;
    if (o.output === 'json' || o.output === 'yaml')
      return emit(o.output, {
        findings,
        sources,
        mismatches: findings.length,
        incomplete,
        reference: inputs.reference,
      });
    print(
      table(
        ['SOURCE', 'STATE', 'READ FROM', 'NOTE'],
        sources.map((s) => [
          s.source,
          s.state === 'ok' ? paint('green', s.state) : paint(s.state === 'skipped' ? 'dim' : 'red', s.state),
          s.from,
          s.note,
        ]),
      ),
    );
    print('');
    if (findings.length === 0) {
      print(
        incomplete
          ? paint('yellow', 'no mismatch among the sources read, but the audit is incomplete (see above)')
          : paint('green', `no mismatch: every source agrees with ${inputs.reference}`),
      );
      return;
    }
    print(paint('red', `${findings.length} mismatch${findings.length === 1 ? '' : 'es'}:`));
    for (const f of findings) {
      print(
        `\n${paint('bold', `[${f.kind}]`)} ${f.subject}\n  what:    ${f.detail}\n  means:   ${f.meaning}\n  do:      ${f.action}`,
      );
    }
  },
};
